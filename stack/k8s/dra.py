"""Dynamic resource allocation on the real control plane, as an addon: what NVIDIA's DRA driver
for GPUs (k8s-dra-driver-gpu) would put in the API, written over the API by Python in place of
its chart and its kubelet plugin, for KWOK's nodes that have no GPUs to find:

- the driver's two DeviceClasses, `gpu.nvidia.com` (devices of type gpu) and `mig.nvidia.com`
  (type mig), each selecting by driver and type (catalogue/sharing.py says what the driver
  publishes);
- node pools of its own (DEFAULT_POOLS: two A100s on `gpu-a100-dra-1`, two H100s on
  `gpu-h100-dra-1`), `gpu-<pool>-dra-<n>` (labelled `gputype=<pool>-dra`, tainted as every GPU
  node), with no extended GPU resource: their GPUs exist only as devices. Two boards of one
  device class, so that two DRA GPU types of `gpu.nvidia.com` are held apart (each type's own
  DeviceClass, which the portal makes, and Kueue's mapping of each: stack/k8s/kueue.py maps
  the classes of the types named after these pools, `<pool>-dra`);
- per node, the ResourceSlice its kubelet plugin would publish: driver `gpu.nvidia.com`, a pool
  named after the node, `nodeName` set, one device `gpu-<i>` per GPU with the attributes
  `type`, `uuid`, `productName`, `brand`, `architecture` (strings, qualified by the driver's
  name) and the capacity `memory`;
- for a partitionable pool (the H100s: `DraPool.partitionable`), the GPUs as NVIDIA's driver
  publishes them with its partitionable-devices feature on, in resource.k8s.io/v1's shared
  counters: a second slice of the node's pool holds a counter set per GPU,
  `gpu-<i>-counter-set` (its `memory` and its eight `memory-slice-<k>`, one each), and every
  device says what it takes of it (`consumesCounters`): the whole GPU `gpu-<i>` all of it,
  each placement of a MIG profile (MIG_PLACEMENTS: 1g.10gb at slices 0…6, 3g.40gb at 0 and
  4) its memory and its slices, as device `gpu-<i>-mig-<profile>-<start>` of type `mig` with
  the attributes `profile`, `parentUUID` and the GPU's `productName`. The scheduler gives out
  no more of a GPU than its counters hold: a whole-GPU claim and a profile's exclude each
  other, two profiles whose slices overlap too. Kubernetes' DRAPartitionableDevices gate is
  beta and on by default since 1.36 (1.37 here): no flag. The GPU types the pools are for
  are named `<pool>-dra` and, per MIG profile of a partitionable pool,
  `<pool>-<profile, dashed>-dra` ("h100-1g-10gb-dra").

The real kube-scheduler allocates claims from these slices (its DynamicResources plugin is on
by default since resource.k8s.io went GA) and the resource-claim controller makes each pod's
claim from its template; KWOK runs the pods, as it runs every pod here, without preparing any
device. The API server serves resource.k8s.io/v1 by default in 1.37: no flag is needed.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from catalogue.sharing import (
    DRA_DEVICE_TYPES,
    DRA_DRIVER,
    DRA_MIG_CLASS,
    dra_class_selector,
    dra_type_class,
)

if TYPE_CHECKING:
    from .cluster import ControlPlane

RESOURCE_API = "resource.k8s.io/v1"
GPU_TAINT = "nvidia.com/gpu:NoSchedule"


def device_class(name: str) -> dict[str, Any]:
    """A DeviceClass as the driver's chart installs it."""
    return {"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": dra_class_selector(name)}}]}}


@dataclasses.dataclass(frozen=True)
class DraPool:
    """Nodes whose GPUs the driver would publish: `gpus` whole GPUs each."""

    name: str = "a100"
    count: int = 1
    gpus: int = 2
    product: str = "NVIDIA A100-SXM4-80GB"  # NVML's name, as the driver publishes it
    memory: str = "80Gi"
    architecture: str = "Ampere"
    # its GPUs published with shared counters and their MIG profiles' placements as devices
    partitionable: bool = False

    def node_names(self) -> list[str]:
        return [f"gpu-{self.name}-dra-{i}" for i in range(1, self.count + 1)]

    @property
    def label(self) -> str:
        return f"{self.name}-dra"


DEFAULT_POOLS = (DraPool(),
                 DraPool(name="h100", product="NVIDIA H100 80GB HBM3", architecture="Hopper",
                         partitionable=True))

# the MIG profiles a partitionable 80 GB GPU's slices offer: (profile, memory slices one
# instance takes, the slices its placements start at), of the GPU's MEMORY_SLICES
MIG_PLACEMENTS = (("1g.10gb", 1, (0, 1, 2, 3, 4, 5, 6)), ("3g.40gb", 4, (0, 4)))
MEMORY_SLICES = 8


def counter_set(i: int) -> str:
    return f"gpu-{i}-counter-set"


def _slices(first: int, count: int) -> dict[str, Any]:
    return {f"memory-slice-{k}": {"value": "1"} for k in range(first, first + count)}


def _gpu_device(pool: DraPool, node: str, i: int) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": f"gpu-{i}",
        "attributes": {
            "type": {"string": DRA_DEVICE_TYPES[DRA_DRIVER]},
            "uuid": {"string": f"GPU-{node}-{i}"},
            "productName": {"string": pool.product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": pool.architecture},
        },
        "capacity": {"memory": {"value": pool.memory}},
    }
    if pool.partitionable:
        device["consumesCounters"] = [{"counterSet": counter_set(i), "counters": {
            "memory": {"value": pool.memory}, **_slices(0, MEMORY_SLICES)}}]
    return device


def _mig_devices(pool: DraPool, node: str, i: int) -> list[dict[str, Any]]:
    """Each placement of each MIG profile on GPU i, taking its memory and its slices."""
    devices = []
    for profile, width, starts in MIG_PLACEMENTS:
        memory = f"{profile.split('.')[1].removesuffix('gb')}Gi"
        for start in starts:
            devices.append({
                "name": f"gpu-{i}-mig-{profile.replace('.', '-')}-{start}",
                "attributes": {
                    "type": {"string": DRA_DEVICE_TYPES[DRA_MIG_CLASS]},
                    "uuid": {"string": f"MIG-{node}-{i}-{profile}-{start}"},
                    "parentUUID": {"string": f"GPU-{node}-{i}"},
                    "profile": {"string": profile},
                    "productName": {"string": pool.product},
                    "brand": {"string": "Nvidia"},
                    "architecture": {"string": pool.architecture},
                },
                "capacity": {"memory": {"value": memory}},
                "consumesCounters": [{"counterSet": counter_set(i), "counters": {
                    "memory": {"value": memory}, **_slices(start, width)}}],
            })
    return devices


def resource_slices(pool: DraPool, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices the driver's kubelet plugin publishes for `node`, in a pool named
    after the node (generation 1): its devices, and for a partitionable pool a second slice
    with the GPUs' counter sets (a slice holds either devices or counters)."""
    devices = []
    for i in range(pool.gpus):
        devices.append(_gpu_device(pool, node, i))
        if pool.partitionable:
            devices += _mig_devices(pool, node, i)
    count = 2 if pool.partitionable else 1
    meta = {"driver": DRA_DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}
    found = [{"apiVersion": RESOURCE_API, "kind": "ResourceSlice",
              "metadata": {"name": f"{node}-{DRA_DRIVER}"},
              "spec": {**meta, "devices": devices}}]
    if pool.partitionable:
        found.append({"apiVersion": RESOURCE_API, "kind": "ResourceSlice",
                      "metadata": {"name": f"{node}-{DRA_DRIVER}-counters"},
                      "spec": {**meta, "sharedCounters": [
                          {"name": counter_set(i), "counters": {
                              "memory": {"value": pool.memory}, **_slices(0, MEMORY_SLICES)}}
                          for i in range(pool.gpus)]}})
    return found


def resource_slice(pool: DraPool, node: str) -> dict[str, Any]:
    """The slice of `node`'s devices (resource_slices' first)."""
    return resource_slices(pool, node)[0]


def pool_inventory(pools: tuple[DraPool, ...]) -> dict[str, Any]:
    """The pools' nodes in the inventory's format (kubesim/README.md): GPU nodes with no GPU
    resource, since their GPUs are only devices in the slices."""
    return {"nodePools": [{"name": f"{pool.name}-dra", "count": pool.count,
                           "namePrefix": f"gpu-{pool.name}-dra-",
                           "labels": {"gputype": pool.label}, "cpu": 64, "memory": "512Gi",
                           "taints": [GPU_TAINT]} for pool in pools]}


def type_slugs(pools: tuple[DraPool, ...] = DEFAULT_POOLS) -> list[str]:
    """The DRA GPU types the pools are for: `<pool>-dra` (its whole GPUs), and per MIG profile
    of a partitionable pool `<pool>-<profile, dashed>-dra`."""
    return [slug for pool in pools for slug in (
        pool.label, *(f"{pool.name}-{profile.replace('.', '-')}-dra"
                      for profile, _, _ in (MIG_PLACEMENTS if pool.partitionable else ())))]


def type_classes(pools: tuple[DraPool, ...] = DEFAULT_POOLS) -> list[str]:
    """The DeviceClasses of the DRA GPU types the pools are for (type_slugs), which the
    portal makes for them and Kueue's Configuration must map."""
    return [dra_type_class(slug) for slug in type_slugs(pools)]


def _created(create: Callable[[], object]) -> None:
    """Create an object; one already there (a restarted addon's) is kept."""
    from kubernetes.client.rest import ApiException

    try:
        create()
    except ApiException as exc:
        if exc.status != 409:
            raise


class DynamicResources:
    """The addon: device classes, the pools' nodes and their slices."""

    name = "dra"

    def __init__(self, pools: tuple[DraPool, ...] = DEFAULT_POOLS) -> None:
        self.pools = pools

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def start(self, cp: ControlPlane) -> None:
        from kubernetes import client

        from kubesim.inventory import parse_inventory

        cp.register_nodes(parse_inventory(pool_inventory(self.pools)))
        with cp.api_client() as api:
            resource = client.ResourceV1Api(api)
            for name in DRA_DEVICE_TYPES:
                klass = client.V1DeviceClass.from_dict(device_class(name))
                assert klass is not None  # (None for None only)
                _created(functools.partial(resource.create_device_class, klass))
            for pool in self.pools:
                for node in pool.node_names():
                    for piece in resource_slices(pool, node):
                        published = client.V1ResourceSlice.from_dict(piece)
                        assert published is not None
                        _created(functools.partial(resource.create_resource_slice, published))

    def stop(self) -> None:
        return None
