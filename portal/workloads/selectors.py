"""Reads about GPUs in the cluster: capacity per GPU type, and GPUs held per namespace."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from django.db.models import QuerySet, Sum

from catalogue.models import GpuType
from portal.keystone.scoping import Action
from portal.kube.client import Kube, KubeError
from portal.kube.quantity import parse_quantity

from .models import Workload

TERMINAL_PHASES = {"Succeeded", "Failed"}


@dataclasses.dataclass
class Capacity:
    nodes: int = 0
    capacity: int = 0  # GPUs the nodes have
    allocatable: int = 0  # GPUs the nodes offer to pods
    largest_node: int = 0  # the most GPUs one node of this type offers


def node_matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def gpu_capacity(gpu_types: list[GpuType], nodes: list[dict[str, Any]],
                 unhealthy: dict[str, int] | None = None) -> dict[str, Capacity]:
    """Per GPU type slug: how many GPUs the matching, schedulable nodes have.

    `unhealthy`: whole GPUs per node name that GPU health marked degraded or lost
    (portal.usage.health); they are taken out of allocatable, less those the device plugin
    already took out (capacity − allocatable). MIG resources are left as they are."""
    result = {t.slug: Capacity() for t in gpu_types}
    unhealthy = unhealthy or {}
    for node in nodes:
        if node.get("spec", {}).get("unschedulable"):
            continue
        labels = node["metadata"].get("labels") or {}
        status = node.get("status", {})
        bad = unhealthy.get(node["metadata"].get("name", ""), 0)
        for gpu_type in gpu_types:
            if not gpu_type.node_selector or not node_matches(labels, gpu_type.node_selector):
                continue
            allocatable = int(parse_quantity((status.get("allocatable") or {}).get(
                gpu_type.resource_name, "0")))
            capacity = int(parse_quantity((status.get("capacity") or {}).get(
                gpu_type.resource_name, "0")))
            if bad and "/mig-" not in gpu_type.resource_name:
                allocatable = max(allocatable - max(bad - max(capacity - allocatable, 0), 0), 0)
            if not allocatable:
                continue
            entry = result[gpu_type.slug]
            entry.nodes += 1
            entry.capacity += capacity
            entry.allocatable += allocatable
            entry.largest_node = max(entry.largest_node, allocatable)
    return result


@dataclasses.dataclass
class Allocation:
    allocated: int = 0  # GPUs that pods bound to matching nodes request
    largest_free_block: int = 0  # the most GPUs free on one node: the biggest request that fits now


def gpu_allocation(gpu_types: list[GpuType], nodes: list[dict[str, Any]],
                   pods: list[dict[str, Any]]) -> dict[str, Allocation]:
    """Per GPU type slug: what live pods hold on its nodes, and the largest free block."""
    held: dict[tuple[str, str], int] = defaultdict(int)  # (node, resource) → GPUs
    resources = {t.resource_name for t in gpu_types}
    for pod in pods:
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
            continue
        for resource in resources:
            held[(node_name, resource)] += pod_resource_count(pod, resource)
    result = {t.slug: Allocation() for t in gpu_types}
    for node in nodes:
        if node.get("spec", {}).get("unschedulable"):
            continue
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        allocatable = (node.get("status", {}).get("allocatable")) or {}
        for gpu_type in gpu_types:
            if not gpu_type.node_selector or not node_matches(labels, gpu_type.node_selector):
                continue
            offered = int(parse_quantity(allocatable.get(gpu_type.resource_name, "0")))
            used = held[(name, gpu_type.resource_name)]
            entry = result[gpu_type.slug]
            entry.allocated += used
            entry.largest_free_block = max(entry.largest_free_block, max(offered - used, 0))
    return result


def cluster_gpu_capacity(kube: Kube | None = None) -> dict[str, Capacity]:
    from portal.usage.health import unhealthy_gpus_by_node

    kube = kube or Kube()
    nodes = kube.list("Node")["items"]
    return gpu_capacity(list(GpuType.objects.all()), nodes, unhealthy_gpus_by_node())


def pod_resource_count(pod: dict[str, Any], resource: str) -> int:
    """How many of an extended resource (e.g. nvidia.com/gpu) a pod's containers ask for
    (limits, else requests: for extended resources the two are equal)."""
    count = 0
    for container in pod.get("spec", {}).get("containers", []):
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(resource) or \
            (resources.get("requests") or {}).get(resource)
        if amount:
            count += int(parse_quantity(amount))
    return count


def pod_gpus(pod: dict[str, Any], gpu_types: list[GpuType]) -> tuple[str | None, int]:
    """The GPU type (by the pod's node selector and resource) and count a pod holds."""
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    for gpu_type in gpu_types:
        count = pod_resource_count(pod, gpu_type.resource_name)
        if count and node_matches(selector, gpu_type.node_selector):
            return gpu_type.slug, count
    return None, 0


def gpus_in_use_by_namespace(namespaces: set[str], kube: Kube | None = None
                             ) -> dict[str, dict[str, int]]:
    """GPUs held right now by live pods, per namespace and GPU type (one list call)."""
    kube = kube or Kube()
    gpu_types = list(GpuType.objects.all())
    usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in kube.list("Pod")["items"]:
        namespace = pod["metadata"].get("namespace")
        if namespace not in namespaces or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
            continue
        slug, count = pod_gpus(pod, gpu_types)
        if slug:
            usage[namespace][slug] += count
    return {ns: dict(by_type) for ns, by_type in usage.items()}


def workload_project_elsewhere(identity, pk: int):
    """The caller's other project that workload `pk` belongs to, or None: for a link to a
    workload of one of their projects that is not the current one (the page offers to switch).
    Another user's project, a deleted workload or no workload at all: None alike, so the
    answer is the same 404 and says nothing."""
    if identity is None or not identity.projects:
        return None
    project_id = (Workload.objects.filter(pk=pk, deleted_at__isnull=True)
                  .values_list("tenant__keystone_project_id", flat=True).first())
    current = identity.project.id if identity.project is not None else None
    if project_id is None or project_id == current:
        return None
    return next((p for p in identity.projects if p.id == project_id), None)


def workload_may_change(identity, workload: Workload) -> bool:
    """Members change their own workloads, managers (and admins) every one of the project
    (`Workload.objects.restrict(identity, "change")`, for a row in hand)."""
    return Workload.objects.permits(identity, Action.CHANGE, workload)


def workload_may_see_secrets(identity, workload: Workload) -> bool:
    """Who reads a workload's access token, and the log lines, events and arguments that may
    carry one: those who may manage it (owner, the project's managers, admins). Other members
    and readers see that it runs, not how to get in (portal/workloads/logs.py redacts)."""
    return workload_may_change(identity, workload)


@dataclasses.dataclass
class GpuAvailability:
    """One GPU type as the launch page and the dashboard show it."""

    gpu_type: GpuType
    quota_limit: int  # the tenant's quota for this type
    quota_used: int  # GPUs of this type the tenant's active workloads hold
    total_limit: int  # the tenant's quota of GPUs in all
    total_used: int
    allocatable: int | None = None  # None: the cluster was not asked or did not answer
    free: int | None = None
    largest_node: int | None = None

    @property
    def known(self) -> bool:
        return self.allocatable is not None

    @property
    def may_use(self) -> int:
        """How many more GPUs of this type the quota admits (per type and in all)."""
        return max(min(self.quota_limit - self.quota_used, self.total_limit - self.total_used), 0)


def gpus_held_by_type(workloads: QuerySet[Workload]) -> dict[str, int]:
    """GPUs per type slug that these workloads hold."""
    return dict(workloads.order_by().values_list("gpu_type__slug").annotate(n=Sum("gpu_count")))


def gpu_availability(tenant, quota, *, ask_cluster: bool = True
                     ) -> tuple[list[GpuAvailability], str | None]:
    """Per enabled GPU type: the tenant's quota use and (asking the cluster) free GPUs.

    Free = allocatable − GPUs of every tenant's active workloads, as `GET gpu-types/` counts.
    Quota use counts what admission counts: the tenant's active, not deleted workloads.
    Returns (rows, the cluster's error when it did not answer, else None)."""
    capacity, cluster_error = None, None
    if ask_cluster:
        try:
            capacity = cluster_gpu_capacity()
        except KubeError as exc:
            cluster_error = str(exc) or type(exc).__name__
    active = Workload.objects.filter(state__in=Workload.ACTIVE_STATES)
    held = gpus_held_by_type(active) if capacity is not None else {}
    tenant_held = gpus_held_by_type(active.filter(tenant=tenant, deleted_at__isnull=True))
    limits = quota.gpus_by_type()
    rows = []
    for gpu_type in GpuType.objects.filter(enabled=True):
        row = GpuAvailability(gpu_type=gpu_type, quota_limit=limits.get(gpu_type.slug, 0),
                              quota_used=tenant_held.get(gpu_type.slug, 0),
                              total_limit=quota.gpus_total,
                              total_used=sum(tenant_held.values()))
        cap = capacity.get(gpu_type.slug) if capacity is not None else None
        if cap is not None:
            row.allocatable = cap.allocatable
            row.largest_node = cap.largest_node
            row.free = max(cap.allocatable - held.get(gpu_type.slug, 0), 0)
        rows.append(row)
    return rows, cluster_error
