"""Reads about GPUs in the cluster: capacity per GPU type, and GPUs held per namespace."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from portal.kube.client import Kube
from portal.kube.quantity import parse_quantity

from .models import GpuType

TERMINAL_PHASES = {"Succeeded", "Failed"}


@dataclasses.dataclass
class Capacity:
    nodes: int = 0
    capacity: int = 0  # GPUs the nodes have
    allocatable: int = 0  # GPUs the nodes offer to pods
    largest_node: int = 0  # the most GPUs one node of this type offers


def node_matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def gpu_capacity(gpu_types: list[GpuType], nodes: list[dict[str, Any]]) -> dict[str, Capacity]:
    """Per GPU type slug: how many GPUs the matching, schedulable nodes have."""
    result = {t.slug: Capacity() for t in gpu_types}
    for node in nodes:
        if node.get("spec", {}).get("unschedulable"):
            continue
        labels = node["metadata"].get("labels") or {}
        status = node.get("status", {})
        for gpu_type in gpu_types:
            if not gpu_type.node_selector or not node_matches(labels, gpu_type.node_selector):
                continue
            allocatable = int(parse_quantity((status.get("allocatable") or {}).get(
                gpu_type.resource_name, "0")))
            if not allocatable:
                continue
            entry = result[gpu_type.slug]
            entry.nodes += 1
            entry.capacity += int(parse_quantity((status.get("capacity") or {}).get(
                gpu_type.resource_name, "0")))
            entry.allocatable += allocatable
            entry.largest_node = max(entry.largest_node, allocatable)
    return result


def cluster_gpu_capacity(kube: Kube | None = None) -> dict[str, Capacity]:
    kube = kube or Kube()
    nodes = kube.list("Node")["items"]
    return gpu_capacity(list(GpuType.objects.all()), nodes)


def pod_gpus(pod: dict[str, Any], gpu_types: list[GpuType]) -> tuple[str | None, int]:
    """The GPU type (by the pod's node selector and resource) and count a pod holds."""
    spec = pod.get("spec", {})
    selector = spec.get("nodeSelector") or {}
    for gpu_type in gpu_types:
        count = 0
        for container in spec.get("containers", []):
            resources = container.get("resources") or {}
            amount = (resources.get("limits") or {}).get(gpu_type.resource_name) or \
                (resources.get("requests") or {}).get(gpu_type.resource_name)
            if amount:
                count += int(parse_quantity(amount))
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


def workloads_visible(identity):
    """The workloads of the caller's current project (admins: every project). Deleted ones
    are hidden. Every workload query of the pages and the API starts here."""
    from .models import Workload

    queryset = Workload.objects.select_related("tenant", "owner", "template", "gpu_type").filter(
        deleted_at__isnull=True)
    if identity is None:
        return queryset.none()
    if identity.is_admin:
        return queryset
    project = identity.project
    if project is None:
        return queryset.none()
    return queryset.filter(tenant__keystone_project_id=project.id)


def workload_may_change(identity, workload, user) -> bool:
    """Members change their own workloads, managers (and admins) every one of the project."""
    role = identity.role if identity is not None else None
    if role is None or not role.can_launch:
        return False
    return role.can_manage_all or workload.owner_id == user.pk
