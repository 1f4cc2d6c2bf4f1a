"""MultiKueue on two real control planes (tests/fixtures/multicluster.py): a Job and a JobSet
queued on the manager run on the worker `east`'s H100 nodes and finish there, their status
mirrored back and the worker's copies removed; a worker that stops answering keeps what it
runs, and the work finishes when it is back.

The queues are the portal's own manifests (tenants/kueue.py) on both clusters, the manager's
ClusterQueue with the MultiKueue check (kube/multikueue.py)."""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from collections.abc import Iterator

import pytest
import yaml

from kube import multikueue
from kube.client import Kube
from kube.labels import LABEL_PROJECT_ID, LABEL_QUEUED, MANAGED_BY, QUEUE_LABEL
from stack.k8s.multikueue import cluster_active
from tenants.kueue import (
    LOCAL_QUEUE,
    FlavorSpec,
    QueueSpec,
    make_cluster_queue,
    make_local_queue,
    make_resource_flavors,
)
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.multicluster import kueue_workloads, worker_back
from tests.support.waiting import eventually

pytestmark = [pytest.mark.realcluster, pytest.mark.timeout(300)]

H100 = FlavorSpec(slug="h100", resource="nvidia.com/gpu", node_labels=(("gputype", "h100"),))


def _apply(kube: Kube, obj: dict) -> None:
    current = kube.get(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
    if current is None:
        kube.create(obj)


@pytest.fixture
def tenant_queue(multi_cluster) -> Iterator[str]:
    """A tenant's namespace, ClusterQueue and LocalQueue on the manager (its queue dispatching
    through MultiKueue) and the same on the worker; all gone after the test."""
    namespace = f"mk-{uuid.uuid4().hex[:10]}"
    spec = QueueSpec(name=namespace, namespace=namespace, gpus=(("h100", 16),), cpu=512,
                     memory_gb=4096, borrowing_limit=None, lending_limit=None)
    labels = {**MANAGED_BY, LABEL_PROJECT_ID: uuid.uuid4().hex, LABEL_QUEUED: "true"}
    with contextlib.ExitStack() as stack:
        for cp in (multi_cluster.east, multi_cluster.manager):
            stack.enter_context(cluster_objects_of_the_test(cp.api_client, timeout=90))
        for cp, dispatching in ((multi_cluster.east, False), (multi_cluster.manager, True)):
            queue = make_cluster_queue(spec, [H100])
            with cp.api_client() as client:
                kube = Kube(client)
                for flavor in make_resource_flavors([H100]):
                    _apply(kube, flavor)
                kube.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": namespace, "labels": labels}})
                kube.create(multikueue.with_admission_check(queue) if dispatching else queue)
                kube.create(make_local_queue(spec))
        yield namespace


def gpu_job(name: str, namespace: str, *, run_seconds: int = 1, gpus: int = 1) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"kubesim.io/run-seconds": str(run_seconds)}},
            "spec": {"restartPolicy": "Never",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "busybox:1.36", "resources": {
                         "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                         "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


def job_succeeded(job: dict | None) -> bool:
    return job is not None and any(c["type"] == "Complete" and c["status"] == "True"
                                   for c in (job.get("status") or {}).get("conditions") or [])


def admitted_on(workload: dict) -> str | None:
    """The worker a manager's Workload was dispatched to (its MultiKueue check's message)."""
    status = workload.get("status") or {}
    for check in status.get("admissionChecks") or []:
        if check["name"] == multikueue.ADMISSION_CHECK and check["state"] == "Ready":
            return str(check.get("message", ""))
    return None


def dispatched_to_east(manager: Kube, namespace: str) -> dict:
    """The namespace's one Workload on the manager once its MultiKueue check names the worker.
    MultiKueue creates the worker's copy of the job before it writes that check's state in the
    same pass, so the copy's pod can be on the worker while the manager's Workload does not
    say so yet."""
    def named() -> dict:
        (workload,) = manager.list("Workload", namespace)["items"]
        assert '"east"' in (admitted_on(workload) or ""), workload.get("status")
        return workload

    return eventually(named, timeout=30,
                      message="the manager's Workload does not name east as its worker")


def pair_state(clusters, namespace: str) -> str:
    """Where a namespace's work stands in the pair: a failed wait's description (the manager's
    Workloads; the worker's copies of the jobs, whether suspended, their Workloads and pods;
    the manager's connection to the worker)."""
    with clusters.manager.api_client() as m, clusters.east.api_client() as w:
        manager, east = Kube(m), Kube(w)
        copies = {kind: [(o["metadata"]["name"], (o.get("spec") or {}).get("suspend"))
                         for o in east.list(kind, namespace)["items"]]
                  for kind in ("Job", "JobSet")}
        pods = [p["metadata"]["name"] for p in east.list("Pod", namespace)["items"]]
        return (f"on the manager {kueue_workloads(manager, namespace)}; on east {copies}, "
                f"{kueue_workloads(east, namespace)}, pods {pods}; "
                f"east Active: {cluster_active(clusters.manager, 'east')}; "
                f"Kueue's last errors on the manager: {kueue_errors(clusters.manager)}; "
                f"on east: {kueue_errors(clusters.east)}")


def kueue_errors(cp, count: int = 8) -> list[str]:
    """The last `count` errors in a control plane's Kueue log (time, logger, what, on which
    object, the error), write conflicts left out: a failed wait's evidence."""
    found = []
    for line in cp.log_tail("kueue", 2000).splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            error = str(entry.get("error", ""))
            if ((entry.get("level") == "error" or entry.get("msg") == "Reconciler error")
                    and "the object has been modified" not in error):  # a conflict, retried
                found.append(f"{entry.get('ts', '')[11:23]} {entry.get('logger')} "
                             f"{entry.get('msg')} {entry.get('name', '')}: "
                             f"{error[:200]}")
    return found[-count:]


def test_a_job_queued_on_the_manager_runs_on_the_worker(multi_cluster, tenant_queue):
    namespace = tenant_queue
    with multi_cluster.manager.api_client() as m, multi_cluster.east.api_client() as w:
        manager, east = Kube(m), Kube(w)
        created = manager.create(gpu_job("train", namespace, run_seconds=3))
        # Kueue's webhook on the manager hands it to MultiKueue: the manager's Job controller
        # leaves it alone
        assert created["spec"]["managedBy"] == multikueue.CONTROLLER

        def running_pod_on_east() -> dict:
            pods = east.list("Pod", namespace)["items"]
            assert pods, "no pod on the worker yet"
            (pod,) = pods
            assert pod["spec"].get("nodeName", "").startswith("east-gpu-h100-")
            return pod

        pod = eventually(running_pod_on_east, timeout=60,
                         message=lambda: pair_state(multi_cluster, namespace))
        assert pod["spec"]["nodeSelector"] == {"gputype": "h100"}  # the worker's flavor
        assert manager.list("Pod", namespace)["items"] == []  # nothing runs on the manager
        dispatched_to_east(manager, namespace)
        copy = east.get("Job", "train", namespace)
        assert copy is not None and not copy["spec"].get("managedBy")

        job = eventually(lambda: (j := manager.get("Job", "train", namespace)) and
                         job_succeeded(j) and j, timeout=90,
                         message="the manager's Job did not show the worker's success")
        assert job["status"]["succeeded"] == 1
        eventually(lambda: east.get("Job", "train", namespace) is None, timeout=90,
                   message="the worker's copy of the Job was not removed")


def test_a_jobset_runs_on_the_worker_whole(multi_cluster, tenant_queue):
    namespace = tenant_queue
    template = gpu_job("unused", namespace, run_seconds=2)["spec"]["template"]
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "ranks", "namespace": namespace,
                     "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 2, "template": {"spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template}}}]},
    }
    with multi_cluster.manager.api_client() as m, multi_cluster.east.api_client() as w:
        manager, east = Kube(m), Kube(w)
        created = manager.create(jobset)
        assert created["spec"]["managedBy"] == multikueue.CONTROLLER

        def two_pods_on_east() -> list[str]:
            nodes = [p["spec"].get("nodeName", "") for p in east.list("Pod", namespace)["items"]]
            assert len(nodes) == 2 and all(n.startswith("east-gpu-h100-") for n in nodes)
            return nodes

        eventually(two_pods_on_east, timeout=60,
                   message=lambda: pair_state(multi_cluster, namespace))
        assert manager.list("Job", namespace)["items"] == []  # the manager's JobSet made none

        def completed() -> bool:
            got = manager.get("JobSet", "ranks", namespace) or {}
            return any(c["type"] == "Completed" and c["status"] == "True"
                       for c in (got.get("status") or {}).get("conditions") or [])

        eventually(completed, timeout=90, message="the manager's JobSet did not complete")
        eventually(lambda: east.get("JobSet", "ranks", namespace) is None, timeout=90,
                   message="the worker's copy of the JobSet was not removed")


def test_a_worker_that_stops_answering_keeps_its_work(multi_cluster, tenant_queue):
    namespace = tenant_queue
    east_cp = multi_cluster.east
    with multi_cluster.manager.api_client() as m:
        manager = Kube(m)
        manager.create(gpu_job("long", namespace, run_seconds=20))
        with east_cp.api_client() as w:
            eventually(lambda: Kube(w).list("Pod", namespace)["items"], timeout=60,
                       message=lambda: pair_state(multi_cluster, namespace))
        dispatched_to_east(manager, namespace)
        east_cp.stop_component("kube-apiserver")
        try:
            eventually(lambda: not cluster_active(multi_cluster.manager, "east"), timeout=60,
                       message="the manager's MultiKueueCluster east still says Active")
            # within the worker-lost timeout the dispatched workload stays admitted there
            (workload,) = manager.list("Workload", namespace)["items"]
            assert '"east"' in (admitted_on(workload) or ""), workload.get("status")
            assert not job_succeeded(manager.get("Job", "long", namespace))
        finally:
            worker_back(multi_cluster.manager, east_cp)
        eventually(lambda: job_succeeded(manager.get("Job", "long", namespace)), timeout=120,
                   message="the Job did not finish after the worker came back")
        with east_cp.api_client() as w:
            eventually(lambda: Kube(w).get("Job", "long", namespace) is None, timeout=90,
                       message="the worker's copy of the Job was not removed")


def test_the_manager_acts_on_the_worker_with_its_own_narrow_identity(multi_cluster):
    from kubernetes import client

    account = (f"system:serviceaccount:{multikueue.WORKER_NAMESPACE}:"
               f"{multikueue.WORKER_SERVICE_ACCOUNT}")

    def allowed(verb: str, group: str, resource: str) -> bool:
        review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=account, groups=["system:serviceaccounts", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=resource, namespace="any-tenant")))
        with multi_cluster.east.api_client() as api:
            answer = client.AuthorizationV1Api(api).create_subject_access_review(review)
        return bool(answer.status.allowed)

    assert allowed("create", "batch", "jobs")
    assert allowed("patch", "kueue.x-k8s.io", "workloads")
    assert not allowed("get", "", "secrets")
    assert not allowed("create", "rbac.authorization.k8s.io", "rolebindings")
    assert not allowed("create", "", "pods/exec")
    # and the manager's Secret holds that identity's token, not an admin's certificate
    with multi_cluster.manager.api_client() as api:
        secret = Kube(api).get("Secret", multikueue.secret_name("east"),
                               multikueue.KUEUE_NAMESPACE)
    kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    (user,) = kubeconfig["users"]
    assert set(user["user"]) == {"token"}
    assert kubeconfig["clusters"][0]["cluster"]["server"] == multi_cluster.east.url
