"""The portal's own JobSet and MPIJob (workloads/manifests.py) on the real control plane with
Kueue, JobSet and the MPI operator: queued, admitted whole, every pod created under Pod Security
`restricted`, one per node, and the group succeeds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.support.distributed import (
    JOBSET,
    LOCAL_QUEUE,
    MPIJOB,
    QUEUE_LABEL,
    Queue,
    condition,
    launcher_succeeded,
)
from tests.support.waiting import eventually
from workloads.manifests import JOBSET as ENGINE_JOBSET
from workloads.manifests import MPI, WorkloadSpec, workload_objects

pytestmark = [pytest.mark.realcluster, pytest.mark.timeout(300)]


@pytest.fixture
def queue(kueue_cluster) -> Iterator[Queue]:
    with kueue_cluster.api_client() as api:
        made = Queue(api, gpus=8)
        # the tenant's ServiceAccount every workload pod runs as (tenants/manifests.py)
        client.CoreV1Api(api).create_namespaced_service_account(made.namespace, {
            "metadata": {"name": "workload"}, "automountServiceAccountToken": False})
        try:
            yield made
        finally:
            made.delete()


def spec(queue: Queue, engine: str, workload_id: int, name: str, image: str) -> WorkloadSpec:
    return WorkloadSpec(
        workload_id=workload_id, name=name, namespace=queue.namespace, project_id="p",
        owner="researcher", owner_id="u", template=name, kind="batch", engine=engine,
        image=image, command=("train",), nodes=2, gpu_count=4,
        node_selector=(("gputype", "a100"),),
        cpu="2", memory="4Gi", run_as_user=1000, max_runtime_seconds=600,
        pod_annotations=(("kubesim.io/run-seconds", "4"),),
        queue_labels=((QUEUE_LABEL, LOCAL_QUEUE),))


def create(queue: Queue, objects: list[dict]) -> dict:
    created = None
    for obj in objects:
        if obj["kind"] == "NetworkPolicy":
            client.NetworkingV1Api(queue.api).create_namespaced_network_policy(
                queue.namespace, obj)
        else:
            kind = JOBSET if obj["kind"] == "JobSet" else MPIJOB
            created = queue.create(kind, obj)
    assert created is not None
    return created


def test_the_portals_jobset_runs_one_rank_per_node_and_succeeds(queue):
    objects = workload_objects(spec(queue, ENGINE_JOBSET, 61, "wl-61-ddp",
                                    "nvcr.io/nvidia/pytorch:24.10-py3"))
    created = create(queue, objects)
    assert created["spec"]["suspend"] is True
    eventually(lambda: condition(queue.workload_of(created), "Admitted") == "True", timeout=30,
               message="admitted")

    def ranks():
        pods = queue.pods("gpu-portal.io/workload-id=61")
        assert len(pods) == 2 and all(p.status.phase in ("Running", "Succeeded") for p in pods), \
            [(p.metadata.name, p.status.phase) for p in pods]
        return pods
    pods = eventually(ranks, timeout=40, message="both ranks running")
    assert sorted(p.spec.hostname for p in pods) == ["wl-61-ddp-r-0-0", "wl-61-ddp-r-0-1"]
    assert {p.spec.subdomain for p in pods} == {"wl-61-ddp"}
    assert len({p.spec.node_name for p in pods}) == 2
    for p in pods:
        env = {e.name: e.value for e in p.spec.containers[0].env if e.value is not None}
        assert env["MASTER_ADDR"] == "wl-61-ddp-r-0-0.wl-61-ddp" and env["WORLD_SIZE"] == "2"
        assert p.metadata.annotations["batch.kubernetes.io/job-completion-index"] in ("0", "1")
    svc = client.CoreV1Api(queue.api).read_namespaced_service("wl-61-ddp", queue.namespace)
    assert svc.spec.cluster_ip == "None"
    eventually(lambda: condition(queue.get(JOBSET, "wl-61-ddp"), "Completed") == "True",
               timeout=60, message="the JobSet Completed")


def test_the_portals_mpijob_runs_one_worker_per_node_and_succeeds(queue):
    objects = workload_objects(spec(queue, MPI, 62, "wl-62-mpi",
                                    "docker.io/mpioperator/openmpi:v0.8.2"))
    created = create(queue, objects)
    assert created["spec"]["runPolicy"]["suspend"] is True
    eventually(lambda: condition(queue.workload_of(created), "Admitted") == "True", timeout=30,
               message="admitted")

    def workers():
        pods = queue.pods("gpu-portal.io/workload-id=62,training.kubeflow.org/job-role=worker")
        assert len(pods) == 2 and all(p.status.phase == "Running" for p in pods), \
            [(p.metadata.name, p.status.phase) for p in pods]
        return pods
    pods = eventually(workers, timeout=40, message="both workers running")
    assert len({p.spec.node_name for p in pods}) == 2
    eventually(lambda: launcher_succeeded(queue.get(MPIJOB, "wl-62-mpi")), timeout=90,
               message="the MPIJob Succeeded, its launcher with it")
    launcher = queue.pods("gpu-portal.io/workload-id=62,training.kubeflow.org/job-role=launcher")
    assert launcher and launcher[0].metadata.labels["gpu-portal.io/isolated"] == "true"
