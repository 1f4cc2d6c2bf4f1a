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


class Device(NamedTuple):
    """One device of a ResourceSlice, as much as the capacity view reads."""

    driver: str
    pool: str
    name: str
    node: str  # "" for a device not bound to one node (a slice's nodeSelector or allNodes)
    type: str  # the driver's `type` attribute: "gpu", "mig"
    product: str
    memory: int  # bytes

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)


class SliceView(NamedTuple):
    """What the read model keeps of a ResourceSlice."""

    driver: str
    pool: str
    generation: int
    devices: tuple[Device, ...]


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
            node=node, type=attribute("type"), product=attribute("productName"),
            memory=int(parse_quantity(memory.get("value") or "0"))))
    return SliceView(driver=driver, pool=pool.get("name") or "",
                     generation=int(pool.get("generation") or 0), devices=tuple(devices))


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


def published_devices(slices: Iterable[SliceView]) -> list[Device]:
    """Every device of the slices, each pool's newest generation only."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for piece in slices:
        key = (piece.driver, piece.pool)
        newest[key] = max(newest.get(key, piece.generation), piece.generation)
    return [device for piece in slices if piece.generation == newest[(piece.driver, piece.pool)]
            for device in piece.devices]


def device_matches(gpu_type: Any, device: Device) -> bool:
    """Whether a claim of the DRA type could be given this device: the driver and the device
    class's type, the type's product (when it names one) and at least its memory, in decimal
    GB (catalogue/sharing.py dra_selector: the same terms)."""
    wanted = DRA_DEVICE_TYPES.get(gpu_type.device_class)
    return (device.driver == DRA_DRIVER and wanted is not None and device.type == wanted
            and (not gpu_type.product or device.product == gpu_type.product)
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


def allocations(claims: Iterable[ClaimView]) -> dict[DeviceKey, ClaimView]:
    """Each allocated device → the claim that holds it."""
    return {device: claim for claim in claims for device in claim.devices}


def device_rows(gpu_type: Any, devices: Iterable[Device], held: dict[DeviceKey, ClaimView],
                cordoned: frozenset[str]) -> list[DeviceRow]:
    """The type's devices by node and name, each with the claim that holds it."""
    rows = []
    for device in devices:
        if not device_matches(gpu_type, device):
            continue
        claim = held.get(device.key)
        rows.append(DeviceRow(
            node=device.node, pool=device.pool, name=device.name, product=device.product,
            memory=device.memory, schedulable=device.node not in cordoned,
            claim=f"{claim.namespace}/{claim.name}" if claim else "",
            workload_id=claim.workload_id if claim else None))
    return sorted(rows, key=lambda row: (row.node, row.pool, row.name))


def dra_fields(rows: Iterable[DeviceRow]) -> dict[str, Any]:
    """The capacity view's figures of a DRA type from its device rows (capacity.py's
    GpuTypeCapacity fields): a unit is a device; a node's devices are what one claim can be
    given at most (a pod's devices come from its node)."""
    fields: dict[str, Any] = defaultdict(int)
    per_node: dict[str, list[bool]] = defaultdict(list)  # node → held?, its schedulable devices
    every_node: set[str] = set()
    for row in rows:
        every_node.add(row.node)
        fields["installed"] += 1
        if row.schedulable:
            per_node[row.node].append(bool(row.claim))
    for held in per_node.values():
        offered, used = len(held), sum(held)
        fields["nodes"] += 1
        fields["capacity"] += offered
        fields["allocatable"] += offered
        fields["allocated"] += used
        fields["largest_node"] = max(fields["largest_node"], offered)
        fields["largest_free_block"] = max(fields["largest_free_block"], offered - used)
    fields["matching_nodes"] = len(every_node)
    fields["node_gpus"] = tuple(sorted(((len(h), len(h) - sum(h)) for h in per_node.values()),
                                       reverse=True))
    return dict(fields)


def claimed_workloads(claims: Iterable[ClaimView]) -> frozenset[int]:
    """The workloads some of whose claims hold devices: placed, whether or not their pod is
    bound yet (the scheduler allocates before it binds)."""
    return frozenset(c.workload_id for c in claims if c.workload_id is not None)
