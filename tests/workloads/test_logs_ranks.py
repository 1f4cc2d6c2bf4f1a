"""A distributed workload's logs per rank: `GET workloads/{id}/logs/?rank=N` (and `launcher`)
reads that rank's pod, rank 0's without `rank`; a rank it does not have is a 400 naming the
ones it has. kubesim serves neither JobSet nor the MPI operator, so the ranks' pods are made
here as their controllers make them (names, labels, the completion index annotation); kubesim
runs them and writes their logs, which name the pod."""

from __future__ import annotations

import pytest
from django.test import Client

from catalogue.models import Template
from identity.models import User
from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID, MANAGED_BY, workload_object_name
from tests.support.waiting import eventually
from tests.workloads.api_calls import vision_lab_ready
from workloads.logs import RankUnknown, rank_chosen
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


def group_workload(tenant, gpu_types, *, engine: str, nodes: int = 2) -> Workload:
    template = Template.objects.get(slug="pytorch-ddp" if engine == "jobset" else "mpi")
    workload = Workload.objects.create(
        tenant=tenant, owner=User.objects.get(name="researcher"), name="ddp",
        template=template, kind="batch", gpu_type=gpu_types["a100"], gpu_count=0, nodes=nodes,
        image="docker.io/library/busybox:1.36", cpu=1, memory_gb=1, state=Workload.State.RUNNING,
        launch_spec={"engine": engine})
    workload.object_name = workload_object_name(workload.pk, "ddp")
    workload.save(update_fields=["object_name"])
    return workload


def rank_pod(workload: Workload, name: str, *, labels: dict | None = None,
             annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": workload.tenant.namespace,
        "labels": {**MANAGED_BY, LABEL_WORKLOAD_ID: str(workload.pk), **(labels or {})},
        "annotations": annotations or {}},
        "spec": {"restartPolicy": "Never", "securityContext": {
            "runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "image": "docker.io/library/busybox:1.36",
                            "command": ["sleep", "600"], "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}}}]}}


def logs(headers: dict, workload: Workload, query: str = ""):
    return Client().get(f"/api/v1/workloads/{workload.pk}/logs/{query}", **headers)


def lines_of(headers: dict, workload: Workload, query: str = "") -> list[str]:
    return eventually(lambda: logs(headers, workload, query).json()["lines"], timeout=20,
                      interval=0.3, message=f"no log lines for {query or 'the default'}")


def test_a_jobsets_logs_per_rank(vision, api_headers, gpu_types, cluster):
    workload = group_workload(vision, gpu_types, engine="jobset")
    kube = Kube()
    for rank in (0, 1):
        index = {"batch.kubernetes.io/job-completion-index": str(rank)}
        kube.create(rank_pod(workload, f"{workload.object_name}-r-0-{rank}-x1x2x",
                             labels={"jobset.sigs.k8s.io/restart-attempt": "0", **index},
                             annotations=index))
    headers = api_headers("researcher")
    one = lines_of(headers, workload, "?rank=1")
    assert f"{workload.object_name}-r-0-1-x1x2x" in one[0]
    default = lines_of(headers, workload)
    assert f"{workload.object_name}-r-0-0-x1x2x" in default[0]  # rank 0's
    missing = logs(headers, workload, "?rank=2")
    assert missing.status_code == 400
    assert missing.json() == {"code": "invalid", "category": "invalid",
                              "detail": "This workload has ranks 0 to 1; there is no rank 2.",
                              "fields": {"rank": ["This workload has ranks 0 to 1; there is no "
                                                  "rank 2."]}}
    assert logs(headers, workload, "?rank=launcher").status_code == 400  # a JobSet has none
    assert logs(headers, workload, "?rank=-1").json()["detail"] == \
        "rank: a rank number (0, 1, …) or `launcher`."


def test_an_mpijobs_launcher_and_workers(vision, api_headers, gpu_types, cluster):
    workload = group_workload(vision, gpu_types, engine="mpi", nodes=1)
    kube = Kube()
    role = "training.kubeflow.org/job-role"
    kube.create(rank_pod(workload, f"{workload.object_name}-worker-0", labels={
        role: "worker", "training.kubeflow.org/replica-index": "0"}))
    kube.create(rank_pod(workload, f"{workload.object_name}-launcher-q7w8e",
                         labels={role: "launcher"}))
    headers = api_headers("researcher")
    assert f"{workload.object_name}-launcher-q7w8e" in \
        lines_of(headers, workload, "?rank=launcher")[0]
    assert f"{workload.object_name}-worker-0" in lines_of(headers, workload, "?rank=0")[0]
    assert logs(headers, workload, "?rank=1").json()["detail"] == \
        "This workload has rank 0 and the launcher (rank=launcher); there is no rank 1."


@pytest.mark.parametrize(("engine", "nodes", "asked", "chosen"), [
    ("jobset", 4, None, 0), ("jobset", 4, 3, 3), ("mpi", 2, "launcher", "launcher"),
    ("", 1, None, None)])
def test_the_rank_chosen(engine, nodes, asked, chosen):
    workload = Workload(nodes=nodes, launch_spec={"engine": engine})
    assert rank_chosen(workload, asked) == chosen


def test_a_one_pod_workload_has_no_ranks():
    with pytest.raises(RankUnknown, match="runs as one pod"):
        rank_chosen(Workload(nodes=1, launch_spec={"engine": ""}), 0)
