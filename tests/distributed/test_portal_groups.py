"""Distributed training through the portal on the real control plane with Kueue, JobSet and the
MPI operator: the portal's own launch (admission, the create task) and tracker over
real JobSets and MPIJobs, in tenants provisioned by the portal (Pod Security restricted, their
ClusterQueue in the cohort).

The demo inventory has two A100 nodes of 8 GPUs: a group of 2 nodes × 8 takes both, so "room
for one group only" is two such groups; ranks go one per node (required anti-affinity)."""

from __future__ import annotations

import uuid

import pytest

from catalogue.models import Template
from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID
from tests.support.kueue import make_tenant as queue_tenant
from tests.support.kueue import queued_cluster  # noqa: F401 - a fixture
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.services import AdmissionRefused, workload_launch, workload_stop
from workloads.tasks import workload_create_task, workload_stop_task
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State
PROGRAM = ["python", "train.py"]


@pytest.fixture
def owner(db):
    from identity.models import User

    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def groups_cluster(queued_cluster) -> list:  # noqa: F811 - the fixture
    return queued_cluster


def make_tenant(made: list, *, a100: int, borrowing: int | None = 0):
    """A tenant provisioned by the portal (tests/queueing's), borrowing nothing by default."""
    return queue_tenant(made, a100=a100, borrowing=borrowing)


def launch_group(tenant, user, gpu_types, *, template: str = "pytorch-ddp", nodes: int = 2,
                 gpus: int = 4, run_seconds: int = 600, retries: int = 0,
                 env: dict[str, str] | None = None) -> Workload:
    chosen = Template.objects.get(slug=template)
    request = {"template": chosen, "name": f"{template}-{uuid.uuid4().hex[:4]}", "kind": "batch",
               "gpu_type": gpu_types["a100"], "gpu_count": gpus, "nodes": nodes,
               "image": chosen.image, "command": PROGRAM, "cpu": 2, "memory": 4,
               "retries": retries,
               "env": {"KUBESIM_RUN_SECONDS": str(run_seconds), **(env or {})}}
    workload, _ = workload_launch(tenant=tenant, user=user, request=request)
    workload_create_task(workload.pk)
    return state_of(workload)


def group_pods(kueue_cluster, workload: Workload) -> list[dict]:
    with kueue_cluster.api_client() as client:
        return Kube(client).list("Pod", workload.tenant.namespace,
                                 label_selector=f"{LABEL_WORKLOAD_ID}={workload.pk}")["items"]


def env_of(pod: dict) -> dict[str, object]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "app")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


def kueue_workloads(kueue_cluster, namespace: str) -> list[dict]:
    with kueue_cluster.api_client() as client:
        return Kube(client).list("Workload", namespace)["items"]


def test_a_two_node_ddp_group_runs_every_rank_with_its_env_and_succeeds(
        groups_cluster, kueue_cluster, owner, gpu_types):
    tenant = make_tenant(groups_cluster, a100=8)
    workload = launch_group(tenant, owner, gpu_types, run_seconds=4)
    assert (workload.nodes, workload.gpu_count, workload.gpu_total) == (2, 4, 8)
    tracker = Tracker()
    track_until(tracker, lambda: state_of(workload).state == S.RUNNING, timeout=60,
                describe=lambda: f"{workload.state}: {workload.reason}")
    pods = sorted(group_pods(kueue_cluster, workload),
                  key=lambda p: int(p["metadata"]["annotations"][
                      "batch.kubernetes.io/job-completion-index"]))
    assert len(pods) == 2
    assert len({p["spec"]["nodeName"] for p in pods}) == 2  # one rank per node
    master = env_of(pods[0])["MASTER_ADDR"]
    for rank, pod in enumerate(pods):
        env = env_of(pod)
        assert env["MASTER_ADDR"] == master and str(master).startswith(workload.object_name)
        assert (env["MASTER_PORT"], env["WORLD_SIZE"], env["NPROC_PER_NODE"]) == \
            ("29500", "2", "4")
        # NODE_RANK is the pod's completion index, through the downward API
        assert env["NODE_RANK"]["fieldRef"]["fieldPath"].endswith(
            "['batch.kubernetes.io/job-completion-index']")
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == \
            str(rank)
        container = next(c for c in pod["spec"]["containers"] if c["name"] == "app")
        assert container["command"] == ["torchrun"] and container["args"][-3:] == \
            ["--no-python", *PROGRAM]
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    # one Kueue Workload for the whole group
    ours = [w for w in kueue_workloads(kueue_cluster, tenant.namespace)
            if any(o["kind"] == "JobSet" for o in w["metadata"].get("ownerReferences") or ())]
    assert len(ours) == 1
    ranks = state_of(workload).ranks
    assert [(r["rank"], r["role"], r["state"]) for r in ranks] == \
        [(0, "worker", "running"), (1, "worker", "running")]
    assert {r["node"] for r in ranks} == {p["spec"]["nodeName"] for p in pods}
    track_until(tracker, lambda: state_of(workload).state == S.SUCCEEDED, timeout=60,
                describe=lambda: f"{workload.state}: {workload.reason}")


def test_an_mpijob_with_two_workers_succeeds(groups_cluster, kueue_cluster, owner, gpu_types):
    tenant = make_tenant(groups_cluster, a100=8)
    workload = launch_group(tenant, owner, gpu_types, template="mpi", run_seconds=3)
    tracker = Tracker()
    track_until(tracker, lambda: state_of(workload).state == S.SUCCEEDED, timeout=90,
                describe=lambda: f"{workload.state}: {workload.reason} {workload.ranks}")
    roles = sorted(r["role"] for r in state_of(workload).ranks)
    assert roles.count("worker") == 2 and roles.count("launcher") <= 1


def test_with_room_for_one_group_the_other_waits_whole_without_a_pod(
        groups_cluster, kueue_cluster, owner, gpu_types):
    tenant = make_tenant(groups_cluster, a100=16)
    # the first runs until it is stopped: the checks below hold only while it runs (with a
    # run of 12 s, a loaded run could see it end, and the second start, before they were done)
    first = launch_group(tenant, owner, gpu_types, gpus=8)
    second = launch_group(tenant, owner, gpu_types, gpus=8, run_seconds=2)
    tracker = Tracker()
    track_until(tracker, lambda: state_of(first).state == S.RUNNING
                and state_of(second).state == S.QUEUED, timeout=60,
                describe=lambda: f"{first.state} {first.reason} / {second.state} "
                                 f"{second.reason}")
    bound = [p for p in group_pods(kueue_cluster, second) if p["spec"].get("nodeName")]
    assert bound == []  # queued whole: none of its ranks holds a node
    running = [p for p in group_pods(kueue_cluster, first)
               if (p.get("status") or {}).get("phase") == "Running"]
    assert len(running) == 2
    # while the first runs, the second never gets a pod onto a node
    for _ in range(3):
        tracker.run_for(1.0)
        assert not [p for p in group_pods(kueue_cluster, second) if p["spec"].get("nodeName")]
        assert state_of(second).state == S.QUEUED
    # the room comes free: the second is admitted, whole
    workload_stop(workload=state_of(first), user=owner)
    workload_stop_task(first.pk)
    track_until(tracker, lambda: state_of(second).state in (S.RUNNING, S.SUCCEEDED),
                timeout=90, describe=lambda: f"{second.state}: {second.reason}")


def test_a_failing_rank_restarts_the_group_then_fails_it_naming_the_rank(
        groups_cluster, kueue_cluster, owner, gpu_types):
    tenant = make_tenant(groups_cluster, a100=8)
    # each try fails at once: nothing is checked while it runs
    workload = launch_group(tenant, owner, gpu_types, run_seconds=1, retries=1,
                            env={"KUBESIM_EXIT_CODE": "3"})
    tracker = Tracker()
    track_until(tracker, lambda: state_of(workload).state == S.FAILED, timeout=120,
                describe=lambda: f"{workload.state}: {workload.reason} " + " | ".join(
                    f"{e.at:%S.%f} {e.source} {e.reason}: {e.message}"
                    for e in workload.events.all()))
    assert "rank" in workload.reason and "code 3" in workload.reason
    reasons = " ".join(workload.events.values_list("message", flat=True))
    assert "restart" in reasons.lower()


def test_the_quota_counts_every_nodes_gpus_and_a_never_fit_group_is_refused(
        groups_cluster, owner, gpu_types, login, api_headers):
    tenant = make_tenant(groups_cluster, a100=4, borrowing=0)
    with pytest.raises(AdmissionRefused, match="at most 4 a100 GPUs at once .* 8 can never"):
        launch_group(tenant, owner, gpu_types, nodes=2, gpus=4)
    assert launch_group(tenant, owner, gpu_types, nodes=2, gpus=2).state in (S.QUEUED,
                                                                            S.PENDING)


def test_a_never_fitting_group_is_refused_before_submit(groups_cluster, gpu_types):
    from workloads.validation import LaunchInvalid, launch_clean

    chosen = Template.objects.get(slug="pytorch-ddp")
    with pytest.raises(LaunchInvalid) as refused:
        launch_clean(request={"name": "big", "template": chosen,
                              "gpu_type": gpu_types["a100"], "gpu_count": 8, "nodes": 3,
                              "command": PROGRAM})
    assert refused.value.errors["nodes"] == [
        "Needs 3 nodes with 8 a100 GPUs each; the cluster has 2 such nodes, so this request "
        "can never run."]


def test_stopping_a_group_removes_every_object_of_it(groups_cluster, kueue_cluster, owner,
                                                      gpu_types):
    tenant = make_tenant(groups_cluster, a100=8)
    workload = launch_group(tenant, owner, gpu_types)
    tracker = Tracker()
    track_until(tracker, lambda: state_of(workload).state == S.RUNNING, timeout=60,
                describe=lambda: f"{workload.state}: {workload.reason}")

    def left() -> list[str]:
        """Every object of the kinds a group makes in the tenant's namespace, which holds
        this group alone (its Job and pods carry JobSet's labels, not the portal's)."""
        with kueue_cluster.api_client() as client:
            kube = Kube(client)
            return sorted(f"{kind} {o['metadata']['name']}"
                          for kind in ("JobSet", "Job", "Pod", "Service")
                          for o in kube.list(kind, tenant.namespace)["items"])

    before = left()
    name = workload.object_name
    assert [o.split()[0] for o in before] == ["Job", "JobSet", "Pod", "Pod", "Service"]
    assert f"JobSet {name}" in before and f"Service {name}" in before
    workload_stop(workload=workload, user=owner)
    workload_stop_task(workload.pk)
    eventually(lambda: not left(), timeout=60, interval=0.5,
               message=lambda: f"objects of the stopped group are left: {left()}")
    assert left() == []
    track_until(tracker, lambda: state_of(workload).state == S.STOPPED, timeout=30)
    assert state_of(workload).reason.startswith("stopped by")


def test_deleting_the_tenant_removes_every_object_of_its_groups(
        groups_cluster, kueue_cluster, owner, gpu_types, settings, eager_celery):
    """Its workloads are stopped at once (the stop path), and the namespace goes with whatever
    the groups made (the JobSet's Jobs and Service, the MPI operator's keys and hostfile)."""
    from django.test import TestCase

    from tenants.provisioning import tenant_namespace_delete
    from tenants.services import tenant_mark_deleting

    settings.PORTAL_TENANT_DELETE_GRACE_MINUTES = 0
    tenant = make_tenant(groups_cluster, a100=8)
    ddp = launch_group(tenant, owner, gpu_types, gpus=2)
    mpi = launch_group(tenant, owner, gpu_types, template="mpi", gpus=2)
    tracker = Tracker()
    track_until(tracker, lambda: {state_of(ddp).state, state_of(mpi).state} == {S.RUNNING},
                timeout=90, describe=lambda: f"{ddp.state} {ddp.reason} / {mpi.state} "
                                             f"{mpi.reason}")
    with TestCase.captureOnCommitCallbacks(execute=True):
        tenant_mark_deleting(tenant=tenant, acting_user=None, reason="the project ended")
    assert {state_of(ddp).state, state_of(mpi).state} <= {S.STOPPING, S.STOPPED}
    assert tenant_namespace_delete(tenant_id=tenant.pk)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)

        def left() -> list[str]:
            return [f"{kind} {o['metadata']['name']}" for kind in ("JobSet", "MPIJob", "Pod")
                    for o in kube.list(kind, tenant.namespace)["items"]]

        eventually(lambda: not left() and kube.get("Namespace", tenant.namespace) is None,
                   timeout=90, interval=0.5,
                   message=lambda: f"the deleted tenant's objects are left: {left()}")
