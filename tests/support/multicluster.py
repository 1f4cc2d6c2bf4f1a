"""The portal on two real control planes (tests/fixtures/multicluster.py): its home cluster is
the MultiKueue manager, the worker `east` (2 × 8 H100, a GPU type only it has) registered as a
cluster of the portal; tenants provisioned in both; what a test made in either is gone before
the next."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from catalogue.models import GpuType
from clusters.models import Cluster
from clusters.services import cluster_probe_one
from kube.client import Kube
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.waiting import eventually
from workloads.models import Workload

EAST = "east"


@dataclasses.dataclass
class Portal:
    """The pair, as the portal sees it: `manager` and `east` (ControlPlanes, admin access for
    the test's own checks)."""

    manager: Any
    east: Any

    def manager_kube(self) -> contextlib.AbstractContextManager[Kube]:
        return _kube(self.manager)

    def east_kube(self) -> contextlib.AbstractContextManager[Kube]:
        return _kube(self.east)


@contextlib.contextmanager
def _kube(cp: Any) -> Iterator[Kube]:
    with cp.api_client() as client:
        yield Kube(client)


def job(name: str, *, run_seconds: int, **more: Any) -> dict[str, Any]:
    """A launch request (POST workloads/) of a one-GPU H100 batch job that runs `run_seconds`."""
    return {"template": "custom", "kind": "batch", "name": name, "image": "busybox:1.36",
            "command": ["sh", "-c", "echo hello from the worker"], "gpu_type": "h100",
            "gpu_count": 1, "cpu": 1, "memory": 1,
            "env": {"KUBESIM_RUN_SECONDS": str(run_seconds)}, **more}


def jobset(name: str, *, nodes: int, gpus_per_node: int, run_seconds: int,
           **more: Any) -> dict[str, Any]:
    """A launch request of a distributed (JobSet) H100 job: `nodes` ranks of `gpus_per_node`."""
    body = {key: value for key, value in job(name, run_seconds=run_seconds).items()
            if key != "image"}
    return {**body, "template": "pytorch-ddp", "command": ["python", "train.py"],
            "nodes": nodes, "gpu_count": gpus_per_node, **more}


def running_on_east(workload_id: int, ranks: int) -> bool:
    """The workload is running with `ranks` ranks, every one on an east node."""
    row = Workload.objects.get(pk=workload_id)
    return row.state == Workload.State.RUNNING and len(row.ranks) == ranks and all(
        r["node"].startswith("east-gpu-h100-") for r in row.ranks)


def worker_back(manager: Any, worker: Any, name: str = EAST) -> None:
    """After an outage of worker `name`'s API server: start it again with its controllers
    (ControlPlane.resume_apiserver, as a production cluster's come back), then wait until the
    manager's Kueue is connected to it again (its MultiKueueCluster Active: MultiKueue's
    reconnect back-off, 5 s doubling, is the manager's own), so that whatever runs next finds
    the pair as a site would."""
    from stack.k8s.multikueue import cluster_active

    worker.resume_apiserver()
    eventually(lambda: cluster_active(manager, name), timeout=180,
               message=f"the manager's MultiKueueCluster {name} is not Active again")


@contextlib.contextmanager
def gpu_node(cp: Any, name: str, *, gpus: int = 8, gputype: str = "h100") -> Iterator[str]:
    """A KWOK node `name` of `gpus` GPUs of `gputype` on control plane `cp` (the manager has
    none of its own) for the test's length; deleted, and waited for, after it."""
    from kubesim.inventory import parse_inventory

    inventory = parse_inventory({"nodePools": [{
        "name": gputype, "count": 1, "namePrefix": f"{name}-", "labels": {"gputype": gputype},
        "cpu": 64, "memory": "512Gi", "gpu": {"model": "H100-SXM5-80GB", "count": gpus},
        "taints": ["nvidia.com/gpu:NoSchedule"]}]})
    (node,) = inventory.nodes
    cp.register_nodes(inventory)
    try:
        yield node.name
    finally:
        with _kube(cp) as kube:
            kube.delete("Node", node.name)
            eventually(lambda: kube.get("Node", node.name) is None, timeout=60,
                       message=f"the node {node.name} is still there")


def controllers_of(cp: Any) -> dict[str, Any]:
    """What runs with leader election in production on a control plane, by name: the process
    ids of its scheduler, controller-manager, Kueue and JobSet, and the address Kueue's CRDs
    convert through (its webhook's)."""
    from kubernetes import client

    from stack.k8s.jobset import JobSet
    from stack.k8s.kueue import Kueue

    found: dict[str, Any] = {name: cp.procs[name].pid
                             for name in ("kube-scheduler", "kube-controller-manager")}
    for running in cp.addons:
        if isinstance(running, Kueue | JobSet):
            found[running.name] = running.proc.pid if running.proc else None
    with cp.api_client() as api:
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(
            "workloads.kueue.x-k8s.io")
    found["conversion"] = crd.spec.conversion.webhook.client_config.url
    return found


def dispatch_state(manager: Any, workload_id: int) -> str:
    """What the manager's Kueue says of a dispatched workload (its Workload's conditions and
    admission checks) and of its workers (their MultiKueueClusters Active): a failure's
    description."""
    from stack.k8s.multikueue import cluster_active

    row = Workload.objects.get(pk=workload_id)
    with _kube(manager) as kube:
        found = kueue_workloads(kube, row.tenant.namespace, row.object_name)
    return (f"{row.state}: {row.reason}; ranks {row.ranks}; on the manager {found}; "
            f"east Active: {cluster_active(manager, EAST)}")


def kueue_workloads(kube: Kube, namespace: str, name_part: str = "") -> list[tuple]:
    """The namespace's Kueue Workloads (those whose name holds `name_part`): each name, its
    conditions (type, status, reason), its admission checks (name, state, message) and the
    workers MultiKueue nominated for it."""
    return [(w["metadata"]["name"],
             [(c["type"], c["status"], c.get("reason")) for c in
              (w.get("status") or {}).get("conditions") or []],
             [(c["name"], c["state"], c.get("message")) for c in
              (w.get("status") or {}).get("admissionChecks") or []],
             (w.get("status") or {}).get("nominatedClusterNames"))
            for w in kube.list("Workload", namespace)["items"]
            if name_part in w["metadata"]["name"]]


def state(workload_id: int) -> str:
    return str(Workload.objects.get(pk=workload_id).state)


def h100_type() -> GpuType:
    """The worker's GPU type (deploy/kubesim/east-inventory.yaml's nodes)."""
    return GpuType.objects.get_or_create(slug="h100", defaults={
        "name": "NVIDIA H100 80GB", "memory_gb": 80, "node_selector": {"gputype": "h100"}})[0]


@contextlib.contextmanager
def portal_on_manager(clusters: Any, settings: Any) -> Iterator[contextlib.ExitStack]:
    """The portal pointed at the manager (its least-privilege ServiceAccount there), queueing
    on its Kueue, with the H100 type; what the test makes in either cluster is gone after it
    (and what the test puts on the stack it yields is done before that)."""
    settings.KUBECONFIG = str(clusters.manager.portal_kubeconfig)
    settings.PORTAL_QUEUEING = "auto"
    Cluster.objects.filter(home=True).update(state=Cluster.State.READY, reason="")
    h100_type()
    with contextlib.ExitStack() as stack:
        for cp in (clusters.east, clusters.manager):
            stack.enter_context(cluster_objects_of_the_test(cp.api_client, timeout=90))
        yield stack


@contextlib.contextmanager
def portal_on_clusters(clusters: Any, settings: Any) -> Iterator[Portal]:
    """portal_on_manager, and `east` registered with the portal's ServiceAccount there (as a
    row: the pair registered it with the manager's Kueue when it started), probed ready."""
    with portal_on_manager(clusters, settings):
        east = Cluster.objects.create(name=EAST, kubeconfig_path=str(clusters.east.portal_kubeconfig),
                                      gpu_types=["h100"])
        probed = cluster_probe_one(cluster_id=east.pk)
        assert probed is not None and probed.state == Cluster.State.READY, probed and probed.reason
        yield Portal(clusters.manager, clusters.east)


def tenant_everywhere(tenant: Tenant, *, h100: int = 16, a100: int = 0) -> Tenant:
    """The tenant's quota (`h100` of the worker's type) and its namespace and queues in both
    clusters: on the manager with the queues that dispatch to the worker, on the worker with
    the queue the manager's copies name."""
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": h100 + a100, "max_workloads": 40, "cpu": 256, "memory_gb": 1024,
        "gpus_by_type": {"h100": h100, "a100": a100, "v100": 0, "t4": 0}})
    tenant_reconcile(tenant_id=tenant.pk)
    tenant_reconcile(tenant_id=tenant.pk, kube=Kube(cluster=EAST))
    tenant.refresh_from_db()
    return tenant


@pytest.fixture
def portal(multi_cluster: Any, settings: Any, gpu_types: Any, login: Any,
           eager_celery: Any) -> Iterator[Portal]:
    """The portal on the pair, vision-lab's namespace and queues in both."""
    with portal_on_clusters(multi_cluster, settings) as view:
        login("researcher")  # vision-lab becomes a tenant
        tenant_everywhere(Tenant.objects.get(name="vision-lab"))
        yield view
