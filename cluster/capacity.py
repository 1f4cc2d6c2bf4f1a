"""The one capacity view per GPU type, derived from the read model of the cluster.

"Held" is defined here once: the GPUs that live (not finished) pods bound to the type's nodes
ask for, plus the GPUs of admitted portal workloads (Workload.ACTIVE_STATES) that have no pod
bound to a node yet, so that a launch just admitted counts at once. "Free" is allocatable less
held. The cluster part is memoised on the read model's versions: a request costs O(GPU types)
plus one query of the admitted workloads, whatever the number of pods.

A GPU type claimed through DRA (one that names a device class) is counted from devices instead
(devices.py): its units are the devices the cluster's ResourceSlices publish that its claims
could be given, held when a ResourceClaim's allocation holds them; a workload whose claim holds
devices is placed, as one whose pod is bound. Where the cluster does not serve
resource.k8s.io/v1 it has none.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from kube.client import home_cluster
from kube.dra import dra_refusal
from kube.quantity import parse_quantity

from .cache import ClusterCache, PodView, cluster_cache
from .devices import (
    ClaimView,
    DeviceRow,
    SliceView,
    allocations,
    claimed_workloads,
    counters_left,
    device_matches,
    device_rows,
    dra_fields,
    node_layouts,
    published_devices,
    shared_counters,
)
from .hooks import ADMITTED, GPU_TYPES, UNHEALTHY, CatalogueType

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class GpuTypeCapacity:
    """One GPU type in the cluster. Nodes count when schedulable and offering the type's
    resource; `matching_nodes`, `installed` and `unhealthy` count every node its selector
    matches, cordoned ones too."""

    slug: str
    nodes: int = 0
    capacity: int = 0  # GPUs the nodes have
    allocatable: int = 0  # GPUs the nodes offer to pods, less unhealthy ones
    allocated: int = 0  # GPUs that live pods bound to the nodes ask for
    admitted: int = 0  # GPUs of admitted workloads with no pod bound yet
    largest_node: int = 0  # the most GPUs one node offers
    largest_free_block: int = 0  # the most GPUs free on one node: the biggest request that fits
    matching_nodes: int = 0
    installed: int = 0
    unhealthy: int = 0
    # per schedulable node offering the type: (GPUs it offers, GPUs free on it), largest first;
    # what a distributed launch of N nodes × G GPUs is checked against
    node_gpus: tuple[tuple[int, int], ...] = ()

    @property
    def held(self) -> int:
        return self.allocated + self.admitted

    @property
    def free(self) -> int:
        return max(self.allocatable - self.held, 0)

    def nodes_offering(self, gpus: int) -> int:
        """How many nodes offer at least `gpus` of the type (free or not)."""
        return sum(1 for offered, _ in self.node_gpus if offered >= gpus)

    def nodes_free(self, gpus: int) -> int:
        """How many nodes have at least `gpus` of the type free now (admitted workloads
        without pods are not placed on a node, so this may count a node they will take)."""
        return sum(1 for _, free in self.node_gpus if free >= gpus)


def node_matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _amount(node: Obj, field: str, resource: str) -> int:
    return int(parse_quantity(((node.get("status") or {}).get(field) or {}).get(resource, "0")))


def capacity_by_type(gpu_types: Iterable[Any], nodes: Iterable[Obj],
                     pods: Iterable[PodView] = (), unhealthy: dict[str, int] | None = None
                     ) -> tuple[dict[str, GpuTypeCapacity], frozenset[int]]:
    """Per GPU type slug its capacity from nodes and pods (no admitted workloads yet), and the
    ids of the workloads that have a live pod bound to a node.

    `unhealthy`: whole GPUs per node name that GPU health marked degraded or lost
    (usage.health); they are taken out of allocatable, less those the device plugin
    already took out (capacity − allocatable). MIG resources are left as they are."""
    gpu_types, nodes = list(gpu_types), list(nodes)
    unhealthy = unhealthy or {}
    resources = {t.resource_name for t in gpu_types}
    held: dict[tuple[str, str], int] = defaultdict(int)  # (node, resource) → GPUs
    bound: set[int] = set()
    for pod in pods:
        if not pod.node_name or not pod.live:
            continue
        if pod.workload_id is not None:
            bound.add(pod.workload_id)
        for name, count in pod.resources:
            if name in resources:
                held[(pod.node_name, name)] += count
    fields: dict[str, dict[str, int]] = {t.slug: defaultdict(int) for t in gpu_types}
    per_node: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for node in nodes:
        meta = node.get("metadata") or {}
        name, labels = meta.get("name") or "", meta.get("labels") or {}
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        bad = unhealthy.get(name, 0)
        for gpu_type in gpu_types:
            if not gpu_type.node_selector or not node_matches(labels, gpu_type.node_selector):
                continue
            entry = fields[gpu_type.slug]
            capacity = _amount(node, "capacity", gpu_type.resource_name)
            entry["matching_nodes"] += 1
            entry["installed"] += capacity
            entry["unhealthy"] += bad
            if cordoned:
                continue
            allocatable = _amount(node, "allocatable", gpu_type.resource_name)
            if bad and "/mig-" not in gpu_type.resource_name:
                allocatable = max(allocatable - max(bad - max(capacity - allocatable, 0), 0), 0)
            if not allocatable:
                continue
            used = held[(name, gpu_type.resource_name)]
            entry["nodes"] += 1
            entry["capacity"] += capacity
            entry["allocatable"] += allocatable
            entry["allocated"] += used
            entry["largest_node"] = max(entry["largest_node"], allocatable)
            entry["largest_free_block"] = max(entry["largest_free_block"],
                                              max(allocatable - used, 0))
            per_node[gpu_type.slug].append((allocatable, max(allocatable - used, 0)))
    return ({slug: GpuTypeCapacity(slug=slug, **values,
                                   node_gpus=tuple(sorted(per_node[slug], reverse=True)))
             for slug, values in fields.items()},
            frozenset(bound))


def gpu_types() -> list[CatalogueType]:
    """Every GPU type of the catalogue (hooks.GPU_TYPES: every entry's)."""
    return [gpu_type for source in GPU_TYPES for gpu_type in source()]


def unhealthy_gpus() -> dict[str, int]:
    """Whole GPUs per node name out of service (hooks.UNHEALTHY: the most any entry says)."""
    found: dict[str, int] = {}
    for source in UNHEALTHY:
        for node, gpus in source().items():
            found[node] = max(found.get(node, 0), gpus)
    return found


def gpus_admitted_without_pods(bound: frozenset[int] = frozenset()) -> dict[str, int]:
    """GPUs per type slug of admitted workloads none of whose pods is bound to a node yet."""
    result: dict[str, int] = defaultdict(int)
    for pk, slug, count in (row for source in ADMITTED for row in source()):
        if pk not in bound and slug:
            result[slug] += count
    return dict(result)


def with_admitted(by_type: dict[str, GpuTypeCapacity], bound: frozenset[int]
                  ) -> dict[str, GpuTypeCapacity]:
    admitted = gpus_admitted_without_pods(bound)
    return {slug: dataclasses.replace(cap, admitted=admitted.get(slug, 0))
            for slug, cap in by_type.items()}


def _type_key(gpu_types: list[Any]) -> tuple[Any, ...]:
    return tuple((t.slug, t.resource_name, tuple(sorted((t.node_selector or {}).items())),
                  t.device_class, t.product, t.memory_gb, getattr(t, "dra_profile", ""))
                 for t in gpu_types)


def _cordoned(nodes: Iterable[Obj]) -> frozenset[str]:
    return frozenset((n.get("metadata") or {}).get("name") or "" for n in nodes
                     if (n.get("spec") or {}).get("unschedulable"))


def devices_by_type(gpu_types: Iterable[Any], nodes: Iterable[Obj], slices: Iterable[SliceView],
                    claims: Iterable[ClaimView]) -> dict[str, list[DeviceRow]]:
    """Per DRA type slug, its devices and who holds each, and which free ones their GPU's
    counters leave no room for (devices.py)."""
    slices = list(slices)
    devices = published_devices(slices)
    held, cordoned = allocations(claims), _cordoned(nodes)
    left = counters_left(devices, shared_counters(slices), held)
    return {t.slug: device_rows(t, devices, held, cordoned, left)
            for t in gpu_types if t.device_class}


def dra_capacity(gpu_types: Iterable[Any], nodes: Iterable[Obj], slices: Iterable[SliceView],
                 claims: Iterable[ClaimView]) -> tuple[dict[str, GpuTypeCapacity], frozenset[int]]:
    """Per DRA type slug its capacity from devices, and the workloads whose claims hold some."""
    claims = list(claims)
    rows = devices_by_type(gpu_types, nodes, slices, claims)
    return ({slug: GpuTypeCapacity(slug=slug, **dra_fields(found)) for slug, found in rows.items()},
            claimed_workloads(claims))


def _dra_served(types: Sequence[CatalogueType]) -> bool:
    return any(t.device_class for t in types) and dra_refusal() is None


def _device_reflectors(cache: ClusterCache) -> tuple[Any, Any]:
    slices, claims = cache.devices()
    cache.ready(slices, claims)
    return slices, claims


def gpu_capacity(types: Sequence[CatalogueType] | None = None, *,
                 cluster: str | None = None) -> dict[str, GpuTypeCapacity]:
    """Per GPU type slug (every type of the catalogue): the cluster's capacity, held and free
    GPUs now. Raises KubeUnavailable (a KubeError) when the cluster's copy is not there.
    `types`: every type of the catalogue when the caller read them already (the launch page
    shows them beside their capacity), else `gpu_types()`. `cluster`: the home cluster's
    (None) or another's by name; the admitted workloads without pods count on the home
    cluster only, where the portal places every workload."""
    cache = cluster_cache(cluster)
    cache.ready(cache.nodes, cache.pods)
    types = gpu_types() if types is None else list(types)
    unhealthy = unhealthy_gpus()
    key = (cache.nodes.version, cache.pods.version, _type_key(types),
           tuple(sorted(unhealthy.items())))
    by_type, bound = cache.memo("capacity", key, lambda: capacity_by_type(
        types, cache.nodes.items(), cache.pods.items(), unhealthy))
    if home_cluster(cluster) is not None:
        # the admitted without pods and DRA devices: the home cluster's only
        return dict(by_type)
    if _dra_served(types):
        slices, claims = _device_reflectors(cache)
        dra, claimed = cache.memo(
            "dra-capacity", (cache.nodes.version, slices.version, claims.version,
                             _type_key(types)),
            lambda: dra_capacity(types, cache.nodes.items(), slices.items(), claims.items()))
        by_type, bound = {**by_type, **dra}, bound | claimed
    return with_admitted(by_type, bound)


def dra_devices(types: Sequence[CatalogueType] | None = None) -> dict[str, list[DeviceRow]]:
    """Per DRA type slug its devices, node by node, and the claim (and workload) holding each;
    empty where the cluster does not serve resource.k8s.io/v1. Raises KubeUnavailable as
    gpu_capacity does."""
    types = gpu_types() if types is None else list(types)
    if not _dra_served(types):
        return {}
    cache = cluster_cache()
    cache.ready(cache.nodes)
    slices, claims = _device_reflectors(cache)
    rows: dict[str, list[DeviceRow]] = cache.memo(
        "dra-devices", (cache.nodes.version, slices.version, claims.version, _type_key(types)),
        lambda: devices_by_type(types, cache.nodes.items(), slices.items(), claims.items()))
    return rows


def dra_node_layouts() -> dict[str, tuple[str, str]]:
    """Per node publishing GPUs through NVIDIA's DRA driver: how they are carved now and the
    devices it offers (devices.node_layouts); empty where the cluster serves no DRA or the
    catalogue has no DRA type. Raises KubeUnavailable as gpu_capacity does."""
    types = gpu_types()
    if not _dra_served(types):
        return {}
    cache = cluster_cache()
    slices, claims = _device_reflectors(cache)
    layouts: dict[str, tuple[str, str]] = cache.memo(
        "dra-layouts", (slices.version, claims.version),
        lambda: node_layouts(published_devices(slices.items()),
                             allocations(claims.items())))
    return layouts


def dra_node_devices(slug: str, node: str) -> int:
    """The devices of the DRA type `slug` on `node`, cordoned or not (what a maintenance window
    of the node takes out of service; 0 where the cluster serves no DRA)."""
    return sum(1 for row in dra_devices().get(slug, ()) if row.node == node)


def cluster_nodes(cluster: str | None = None) -> list[Obj]:
    """The cluster's nodes (read only; the home cluster's or another's by name). Raises
    KubeUnavailable as gpu_capacity does."""
    cache = cluster_cache(cluster)
    cache.ready(cache.nodes)
    return cache.nodes.items()


def gpus_in_use_by_namespace(namespaces: set[str]) -> dict[str, dict[str, int]]:
    """GPUs that live pods ask for, per namespace and GPU type (by the pod's node selector and
    resource), bound to a node or not; a DRA type's, the devices its claims hold."""
    cache = cluster_cache()
    cache.ready(cache.pods)
    types = gpu_types()

    def build() -> dict[str, dict[str, int]]:
        usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for pod in cache.pods.items():
            if not pod.live or not pod.resources:
                continue
            selector = dict(pod.node_selector)
            for gpu_type in types:
                count = pod.count(gpu_type.resource_name)
                if count and node_matches(selector, gpu_type.node_selector):
                    usage[pod.namespace][gpu_type.slug] += count
                    break
        return {ns: dict(by_type) for ns, by_type in usage.items()}

    every = cache.memo("in-use", (cache.pods.version, _type_key(types)), build)
    if _dra_served(types):
        slices, claims = _device_reflectors(cache)
        held = cache.memo("devices-in-use", (slices.version, claims.version, _type_key(types)),
                          lambda: devices_in_use(types, slices.items(), claims.items()))
        every = {ns: {**every.get(ns, {}), **held.get(ns, {})} for ns in {*every, *held}}
    return {ns: by_type for ns, by_type in every.items() if ns in namespaces}


def devices_in_use(gpu_types: Iterable[Any], slices: Iterable[SliceView],
                   claims: Iterable[ClaimView]) -> dict[str, dict[str, int]]:
    """Devices that claims hold, per namespace and DRA type (the first type, in catalogue
    order, a device matches: each device counts once)."""
    types = [t for t in gpu_types if t.device_class]
    devices = {device.key: device for device in published_devices(slices)}
    usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for claim in claims:
        for key in claim.devices:
            device = devices.get(key)
            gpu_type = next((t for t in types if device and device_matches(t, device)), None)
            if gpu_type is not None:
                usage[claim.namespace][gpu_type.slug] += 1
    return {ns: dict(by_type) for ns, by_type in usage.items()}
