"""GPU types claimed through dynamic resource allocation, counted from the devices the cluster
publishes (pure: no I/O; capacity.py feeds it the read model's copies).

A DRA type's GPUs are not an extended resource of its nodes: the driver's kubelet plugin
publishes each node's devices in ResourceSlices (kube/dra.py says what NVIDIA's driver puts in
them) and the scheduler allocates a claim some of them, writing the devices into the claim's
`status.allocation`. So a DRA type's capacity is the published devices that match what its
claims ask (the driver, the device class's device type, the type's product and least memory:
the same terms as its CEL selectors), on nodes that take pods; its allocated units, those of
them some claim's allocation holds. A pool published in several generations (the driver
rewriting its slices) counts its newest only, as the scheduler does.

Partitionable devices (resource.k8s.io/v1's shared counters, as NVIDIA's driver publishes a
GPU and its MIG profiles when its partitionable-devices feature is on): a pool's slices may
hold counter sets (`sharedCounters`: per GPU, its memory and memory slices) and its devices
say what they take of them (`consumesCounters`). A whole GPU takes all of its GPU's counters,
a MIG device its profile's part, so that the scheduler never gives out more than a GPU has: a
whole-GPU claim and profile claims of one GPU exclude each other. Here a device is available
only while what it would take is left of its GPU's counters, after what the allocated devices
take: a free device that cannot be had now is `blocked` (not offered), and a type's free
devices are counted as the scheduler could hand them out together.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

from kube.dra import DRA_DEVICE_TYPES, DRA_DRIVER
from kube.labels import LABEL_WORKLOAD_ID
from kube.quantity import parse_quantity

Obj = dict[str, Any]
DeviceKey = tuple[str, str, str]  # (driver, pool, device): how an allocation names a device
CounterKey = tuple[str, str, str]  # (driver, pool, counter set)
# what a device takes of its pool's counter sets: ((counter set, ((counter, amount), …)), …)
Consumption = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


class Device(NamedTuple):
    """One device of a ResourceSlice, as much as the capacity view reads."""

    driver: str
    pool: str
    name: str
    node: str  # "" for a device not bound to one node (a slice's nodeSelector or allNodes)
    type: str  # the driver's `type` attribute: "gpu", "mig"
    product: str
    memory: int  # bytes
    profile: str = ""  # a MIG device's profile attribute ("1g.10gb"); "" for a whole GPU
    consumes: Consumption = ()  # a partitionable device's take of its pool's counters

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)


class SliceView(NamedTuple):
    """What the read model keeps of a ResourceSlice."""

    driver: str
    pool: str
    generation: int
    devices: tuple[Device, ...]
    # the counter sets a slice shares (a slice holds either these or devices)
    counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


class ClaimView(NamedTuple):
    """What the read model keeps of an allocated ResourceClaim: who holds which devices."""

    namespace: str
    name: str
    workload_id: int | None
    devices: tuple[DeviceKey, ...]


def _value(attribute: Any) -> str:
    """A device attribute's value, whatever its kind (string, version, int, bool)."""
    if not isinstance(attribute, dict):
        return ""
    for kind in ("string", "version", "int", "bool"):
        if kind in attribute:
            return str(attribute[kind])
    return ""


def slice_view(obj: Obj) -> SliceView:
    """A ResourceSlice as the read model keeps it (the reflector's projection). The driver's
    attributes and capacities may be qualified by its name (`gpu.nvidia.com/productName`) or
    not, as the API allows both for the driver's own."""
    spec = obj.get("spec") or {}
    driver = spec.get("driver") or ""
    pool = spec.get("pool") or {}
    node = spec.get("nodeName") or ""
    devices = []
    for device in spec.get("devices") or []:
        attributes = device.get("attributes") or {}
        capacity = device.get("capacity") or {}

        def attribute(name: str, attributes: dict[str, Any] = attributes) -> str:
            return _value(attributes.get(name) or attributes.get(f"{driver}/{name}"))

        memory = capacity.get("memory") or capacity.get(f"{driver}/memory") or {}
        devices.append(Device(
            driver=driver, pool=pool.get("name") or "", name=device.get("name") or "",
            node=node or device.get("nodeName") or "", type=attribute("type"),
            product=attribute("productName"), profile=attribute("profile"),
            memory=int(parse_quantity(memory.get("value") or "0")),
            consumes=tuple((use.get("counterSet") or "", _counters(use.get("counters")))
                           for use in device.get("consumesCounters") or [])))
    shared = tuple((counter_set.get("name") or "", _counters(counter_set.get("counters")))
                   for counter_set in spec.get("sharedCounters") or [])
    return SliceView(driver=driver, pool=pool.get("name") or "",
                     generation=int(pool.get("generation") or 0), devices=tuple(devices),
                     counters=shared)


def _counters(counters: Any) -> tuple[tuple[str, int], ...]:
    """A counter set's (or a device's take of one), as whole numbers (bytes for memory)."""
    return tuple(sorted((name, int(parse_quantity((value or {}).get("value") or "0")))
                        for name, value in (counters or {}).items()))


def claim_view(obj: Obj) -> ClaimView | None:
    """An allocated ResourceClaim as the read model keeps it; None for one not allocated (the
    reflector then keeps nothing of it)."""
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    if not results:
        return None
    meta = obj.get("metadata") or {}
    workload = (meta.get("labels") or {}).get(LABEL_WORKLOAD_ID) or ""
    return ClaimView(namespace=meta.get("namespace") or "", name=meta.get("name") or "",
                     workload_id=int(workload) if workload.isdigit() else None,
                     devices=tuple((r.get("driver") or "", r.get("pool") or "",
                                    r.get("device") or "") for r in results))


def _newest(slices: Iterable[SliceView]) -> list[SliceView]:
    """The slices of each pool's newest generation."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for piece in slices:
        key = (piece.driver, piece.pool)
        newest[key] = max(newest.get(key, piece.generation), piece.generation)
    return [piece for piece in slices if piece.generation == newest[(piece.driver, piece.pool)]]


def published_devices(slices: Iterable[SliceView]) -> list[Device]:
    """Every device of the slices, each pool's newest generation only."""
    return [device for piece in _newest(slices) for device in piece.devices]


def shared_counters(slices: Iterable[SliceView]) -> dict[CounterKey, dict[str, int]]:
    """Every counter set the slices share (each pool's newest generation), by driver, pool and
    set name."""
    return {(piece.driver, piece.pool, name): dict(counters)
            for piece in _newest(slices) for name, counters in piece.counters}


def counters_left(devices: Iterable[Device], counters: dict[CounterKey, dict[str, int]],
                  held: Iterable[DeviceKey]) -> dict[CounterKey, dict[str, int]]:
    """What is left of each counter set once the allocated devices take theirs."""
    by_key = {device.key: device for device in devices}
    left = {key: dict(values) for key, values in counters.items()}
    for key in held:
        device = by_key.get(key)
        if device is not None:
            _take(left, device)
    return left


def _fits(left: dict[CounterKey, dict[str, int]], device: Device) -> bool:
    """Whether what the device takes is left (a device that takes nothing always fits; a
    counter set not published is not one the scheduler could give either)."""
    for counter_set, wanted in device.consumes:
        have = left.get((device.driver, device.pool, counter_set))
        if have is None or any(have.get(name, 0) < amount for name, amount in wanted):
            return False
    return True


def _take(left: dict[CounterKey, dict[str, int]], device: Device) -> None:
    for counter_set, wanted in device.consumes:
        have = left.setdefault((device.driver, device.pool, counter_set), {})
        for name, amount in wanted:
            have[name] = have.get(name, 0) - amount


def device_matches(gpu_type: Any, device: Device) -> bool:
    """Whether a claim of the DRA type could be given this device: the driver and the device
    class's type, the type's product (when it names one), a MIG type's profile and at least
    its memory, in decimal GB (catalogue/sharing.py dra_type_class_selector: the same
    terms)."""
    wanted = DRA_DEVICE_TYPES.get(gpu_type.device_class)
    profile = getattr(gpu_type, "dra_profile", "")
    return (device.driver == DRA_DRIVER and wanted is not None and device.type == wanted
            and (not gpu_type.product or device.product == gpu_type.product)
            and (not profile or device.profile == profile)
            and device.memory >= int(gpu_type.memory_gb or 0) * 10**9)


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    """One device of a DRA type, for the admin's page: where it is and who holds it."""

    node: str
    pool: str
    name: str
    product: str
    memory: int
    schedulable: bool  # its node takes pods (not cordoned)
    claim: str = ""  # namespace/name of the claim allocated it, "" free
    workload_id: int | None = None
    profile: str = ""
    # free, but what it takes of its GPU's counters is taken by other devices of the GPU (a
    # whole GPU while a MIG device of it is allocated, or the other way round)
    blocked: bool = False


def allocations(claims: Iterable[ClaimView]) -> dict[DeviceKey, ClaimView]:
    """Each allocated device → the claim that holds it."""
    return {device: claim for claim in claims for device in claim.devices}


def device_rows(gpu_type: Any, devices: Iterable[Device], held: dict[DeviceKey, ClaimView],
                cordoned: frozenset[str],
                left: dict[CounterKey, dict[str, int]] | None = None) -> list[DeviceRow]:
    """The type's devices by node and name, each with the claim that holds it. `left`: what
    is left of the pools' counter sets (counters_left); the type's free devices are handed
    out of it in turn, as the scheduler could give them together, and one that no longer
    fits is blocked."""
    left = {key: dict(values) for key, values in (left or {}).items()}
    rows = []
    for device in sorted(devices, key=lambda d: (d.node, d.pool, d.name)):
        if not device_matches(gpu_type, device):
            continue
        claim = held.get(device.key)
        blocked = False
        if claim is None and device.consumes:
            blocked = not _fits(left, device)
            if not blocked:
                _take(left, device)
        rows.append(DeviceRow(
            node=device.node, pool=device.pool, name=device.name, product=device.product,
            memory=device.memory, schedulable=device.node not in cordoned,
            claim=f"{claim.namespace}/{claim.name}" if claim else "",
            workload_id=claim.workload_id if claim else None, profile=device.profile,
            blocked=blocked))
    return rows


def dra_fields(rows: Iterable[DeviceRow]) -> dict[str, Any]:
    """The capacity view's figures of a DRA type from its device rows (capacity.py's
    GpuTypeCapacity fields): a unit is a device; a node's devices are what one claim can be
    given at most (a pod's devices come from its node)."""
    fields: dict[str, Any] = defaultdict(int)
    # node → (held?, blocked?) of each of its schedulable devices
    per_node: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    every_node: set[str] = set()
    for row in rows:
        every_node.add(row.node)
        fields["installed"] += 1
        if row.schedulable:
            per_node[row.node].append((bool(row.claim), row.blocked))
    node_gpus = []
    for states in per_node.values():
        offered = len(states)
        used = sum(held for held, _ in states)
        blocked = sum(blocked for _, blocked in states)
        fields["nodes"] += 1
        fields["capacity"] += offered
        # a device its GPU's other partitions leave no room for is not offered now
        fields["allocatable"] += offered - blocked
        fields["allocated"] += used
        fields["largest_node"] = max(fields["largest_node"], offered)
        fields["largest_free_block"] = max(fields["largest_free_block"], offered - used - blocked)
        node_gpus.append((offered, offered - used - blocked))
    fields["matching_nodes"] = len(every_node)
    fields["node_gpus"] = tuple(sorted(node_gpus, reverse=True))
    return dict(fields)


def claimed_workloads(claims: Iterable[ClaimView]) -> frozenset[int]:
    """The workloads some of whose claims hold devices: placed, whether or not their pod is
    bound yet (the scheduler allocates before it binds)."""
    return frozenset(c.workload_id for c in claims if c.workload_id is not None)


def _gpu_of(device: Device) -> str:
    """The GPU a device is (of): the counter set it takes from, else the device itself."""
    return device.consumes[0][0].removesuffix("-counter-set") if device.consumes else device.name


def node_layouts(devices: Iterable[Device], held: Iterable[DeviceKey]
                 ) -> dict[str, tuple[str, str]]:
    """Per node publishing GPUs of NVIDIA's driver, how they are carved now, in words, and the
    devices it offers: ("2 × NVIDIA H100 80GB HBM3, partitionable (DRA): gpu-0 1 × 1g.10gb
    in use; gpu-1 whole in use", "2 GPUs, or parts of them: 14 × 1g.10gb, 4 × 3g.40gb"). A
    partitionable GPU is carved per claim, by the scheduler, as the claims given its devices
    say."""
    taken = set(held)
    by_node: dict[str, list[Device]] = defaultdict(list)
    for device in devices:
        if device.driver == DRA_DRIVER and device.node:
            by_node[device.node].append(device)
    layouts = {}
    for node, found in sorted(by_node.items()):
        gpus = sorted(d for d in found if d.type == DRA_DEVICE_TYPES[DRA_DRIVER])
        if not gpus:
            continue
        partitionable = any(d.consumes for d in found)
        uses = []
        for gpu in gpus:
            mine = [d for d in found if _gpu_of(d) == _gpu_of(gpu) and d.key in taken]
            if gpu.key in taken:
                uses.append(f"{gpu.name} whole in use")
            elif mine:
                profiles: dict[str, int] = defaultdict(int)
                for device in mine:
                    profiles[device.profile or device.type] += 1
                uses.append(f"{gpu.name} " + ", ".join(f"{n} × {p}" for p, n in
                                                          sorted(profiles.items())) + " in use")
        products = sorted({gpu.product for gpu in gpus})
        layout = (f"{len(gpus)} × {', '.join(products) or 'GPU'}"
                  f"{', partitionable' if partitionable else ''} (DRA)"
                  + (": " + "; ".join(uses) if uses else ""))
        offered: dict[str, int] = defaultdict(int)
        for device in found:
            if device.type != DRA_DEVICE_TYPES[DRA_DRIVER]:
                offered[device.profile or device.type] += 1
        units = f"{len(gpus)} GPUs" + (", or parts of them: " + ", ".join(
            f"{n} × {p}" for p, n in sorted(offered.items())) if offered else "")
        layouts[node] = (layout, units)
    return layouts
