"""The portal's quotas as Kueue objects: pure functions from plain specs to manifests.

- one ResourceFlavor per GPU type (its node labels), and one for CPU and memory;
- one ClusterQueue per tenant, all in one cohort so that a tenant's idle GPUs can be borrowed by
  the others and reclaimed when it needs them; its nominal quota per flavor is the tenant's
  quota, with the tenant's borrowing and lending limits and fair-sharing weight;
- one Cohort per department, a child of the site's cohort: its projects' ClusterQueues are
  its members, so they lend to and borrow from each other within it, and its borrowing limit
  per GPU flavor (its cap less its projects' own quotas) keeps them together within the cap;
- one LocalQueue in each tenant namespace, the queue every workload of the tenant names;
- where the portal's cluster is a MultiKueue manager, per worker cluster a ClusterQueue of the
  tenant's that dispatches to that worker alone (its MultiKueue admission check,
  kube/multikueue.py) and a LocalQueue `gpu-portal-<worker>` in its namespace: a batch launch
  pinned to the worker names that queue. The worker has a LocalQueue of the same name (Kueue
  copies the queue's name with the job) in front of the tenant's ClusterQueue there;
- two WorkloadPriorityClasses: interactive services rank above batch jobs.

Reconciled by tenants/provisioning.py (through tenants/queueing.py); nothing here talks to the cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kube.labels import KUEUE_API_VERSION as API_VERSION
from kube.labels import MANAGED_BY, PRIORITY_LABEL, QUEUE_LABEL
from kube.multikueue import check_name, with_admission_check
from kube.multikueue import local_queue_name as multikueue_local_queue

COHORT = "gpu-portal"
LOCAL_QUEUE = "gpu-portal"
CPU_FLAVOR = "gpu-portal-cpu"
QUEUED_REASON = "Waiting in the tenant's queue for GPUs."

INTERACTIVE = "gpu-portal-interactive"
BATCH = "gpu-portal-batch"
PRIORITIES = {INTERACTIVE: (1000, "Interactive services of the GPU portal: ahead of batch jobs"),
              BATCH: (100, "Batch jobs of the GPU portal")}


def priority_class(kind: str) -> str:
    """The WorkloadPriorityClass of a workload kind ("service" or "batch")."""
    return BATCH if kind == "batch" else INTERACTIVE


def flavor_name(gpu_slug: str) -> str:
    return f"gpu-{gpu_slug}"


@dataclasses.dataclass(frozen=True)
class FlavorSpec:
    slug: str
    resource: str                         # e.g. nvidia.com/gpu
    node_labels: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True)
class QueueSpec:
    """One tenant's ClusterQueue and LocalQueue."""

    name: str                             # the ClusterQueue's name: the tenant's namespace
    namespace: str
    gpus: tuple[tuple[str, int], ...]     # per GPU type slug: the nominal quota
    cpu: int                              # cores
    memory_gb: int
    borrowing_limit: int | None           # GPUs of each type it may borrow (None: no limit)
    lending_limit: int | None             # GPUs of each type it lends at most (None: all idle)
    weight: str = "1"                     # fair sharing
    held: bool = False                    # nothing new admitted (an exhausted hard budget)
    cohort: str = COHORT                  # the site's, or its department's (department_cohort)


def department_cohort(department_id: int) -> str:
    """The name of a department's Cohort (its id: a department's name may change)."""
    return f"{COHORT}-department-{department_id}"


@dataclasses.dataclass(frozen=True)
class CohortSpec:
    """A department's Cohort, below the site's cohort."""

    name: str
    # per GPU type slug the department caps: what its projects may borrow together from the
    # rest of the site (the cap less their own quotas, never below none)
    borrowing: tuple[tuple[str, int], ...]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def make_resource_flavors(flavors: list[FlavorSpec]) -> list[dict[str, Any]]:
    objects = [{"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(CPU_FLAVOR),
                "spec": {}}]
    for flavor in flavors:
        objects.append({"apiVersion": API_VERSION, "kind": "ResourceFlavor",
                        "metadata": _meta(flavor_name(flavor.slug)),
                        "spec": {"nodeLabels": dict(flavor.node_labels)}})
    return objects


def make_priority_classes() -> list[dict[str, Any]]:
    return [{"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": _meta(name),
             "value": value, "description": text}
            for name, (value, text) in PRIORITIES.items()]


def make_cluster_queue(queue: QueueSpec, flavors: list[FlavorSpec]) -> dict[str, Any]:
    """GPU flavors in one resource group (each flavor lists every GPU resource name, 0 for the
    ones it does not provide, as Kueue requires); CPU and memory in another."""
    quota = dict(queue.gpus)
    resources = sorted({f.resource for f in flavors})
    gpu_flavors = []
    for flavor in flavors:
        entries = []
        for resource in resources:
            # quantities as strings: what Kueue's webhook writes back, so a re-read compares equal
            nominal = quota.get(flavor.slug, 0) if resource == flavor.resource else 0
            entry: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
            if resource == flavor.resource:
                if queue.borrowing_limit is not None:
                    entry["borrowingLimit"] = str(queue.borrowing_limit)
                if queue.lending_limit is not None:
                    entry["lendingLimit"] = str(min(queue.lending_limit, nominal))
            entries.append(entry)
        gpu_flavors.append({"name": flavor_name(flavor.slug), "resources": entries})
    groups: list[dict[str, Any]] = [{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": CPU_FLAVOR, "resources": [
            {"name": "cpu", "nominalQuota": str(queue.cpu)},
            {"name": "memory", "nominalQuota": f"{queue.memory_gb}Gi"}]}]}]
    if gpu_flavors:
        groups.append({"coveredResources": resources, "flavors": gpu_flavors})
    return {
        "apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": _meta(queue.name),
        "spec": {
            "cohortName": queue.cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": queue.namespace}},
            # a queue's order is its order: the position shown to users means what it says
            "queueingStrategy": "StrictFIFO",
            "resourceGroups": groups,
            # owners take back what others borrowed; no one loses a workload to a colleague
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never",
                           "borrowWithinCohort": {"policy": "Never"}},
            "fairSharing": {"weight": queue.weight},
            # held (an exhausted hard budget): admitted workloads run to completion, nothing
            # new is admitted and nothing is borrowed; "None" (Kueue's default) admits
            "stopPolicy": "Hold" if queue.held else "None",
        },
    }


def make_department_cohort(cohort: CohortSpec, flavors: list[FlavorSpec]) -> dict[str, Any]:
    """The Cohort's own quota is none (a cap is a ceiling, not GPUs of its own): its members
    hold their nominal quotas, and together borrow from the site's cohort at most
    `borrowing` of each capped flavor. Only capped flavors are listed (each with every GPU
    resource of the group, as Kueue requires); one not listed borrows without a limit."""
    limits = dict(cohort.borrowing)
    capped = [flavor for flavor in flavors if flavor.slug in limits]
    resources = sorted({flavor.resource for flavor in capped})
    spec: dict[str, Any] = {"parentName": COHORT}
    if capped:
        spec["resourceGroups"] = [{"coveredResources": resources, "flavors": [
            {"name": flavor_name(flavor.slug), "resources": [
                {"name": resource, "nominalQuota": "0",
                 **({"borrowingLimit": str(limits[flavor.slug])}
                    if resource == flavor.resource else {})}
                for resource in resources]}
            for flavor in capped]}]
    return {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": _meta(cohort.name),
            "spec": spec}


def make_local_queue(queue: QueueSpec, name: str = LOCAL_QUEUE,
                     cluster_queue: str | None = None) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": _meta(name, queue.namespace),
            "spec": {"clusterQueue": cluster_queue or queue.name}}


def local_queue_name(worker: str | None = None) -> str:
    """The LocalQueue a launch names: the tenant's own, or the one dispatching to `worker`."""
    return multikueue_local_queue(worker) if worker else LOCAL_QUEUE


def dispatching_queue_name(queue: QueueSpec, worker: str) -> str:
    return f"{queue.name}-{worker}"


def make_dispatching_queues(queue: QueueSpec, flavors: list[FlavorSpec],
                            worker: str) -> list[dict[str, Any]]:
    """On the manager: the tenant's ClusterQueue and LocalQueue that dispatch to `worker`. The
    tenant's quota holds there as in its own queue, outside the cohort: what is dispatched runs
    on the worker's GPUs, which lend nothing to the manager's tenants (the worker's own queues
    share them)."""
    cluster_queue = make_cluster_queue(dataclasses.replace(
        queue, name=dispatching_queue_name(queue, worker), borrowing_limit=None,
        lending_limit=None), flavors)
    del cluster_queue["spec"]["cohortName"]
    return [with_admission_check(cluster_queue, check_name(worker)),
            make_local_queue(queue, local_queue_name(worker),
                             dispatching_queue_name(queue, worker))]


def make_worker_local_queue(queue: QueueSpec, worker: str) -> dict[str, Any]:
    """On worker `worker`: the LocalQueue the manager's copies name (`gpu-portal-<worker>`),
    in front of the tenant's ClusterQueue there."""
    return make_local_queue(queue, local_queue_name(worker))


def queue_labels(kind: str, worker: str | None = None) -> dict[str, str]:
    """The labels that put a workload's Job or Deployment (and its pods) in its tenant's queue
    (the one dispatching to `worker`, for a batch launch pinned to a worker cluster)."""
    return {QUEUE_LABEL: local_queue_name(worker), PRIORITY_LABEL: priority_class(kind)}
