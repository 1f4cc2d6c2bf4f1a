"""The simulated cluster's hardware, from a YAML inventory: node pools and LB address pools.

See kubesim/README.md for the format. Parsing is strict: a typo in an inventory should fail at
start-up with a message naming the pool and field, not produce a node without GPUs.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesim import gpus
from kubesim.discovery import MAJOR as API_MAJOR
from kubesim.discovery import MINOR as API_MINOR
from kubesim.quantity import Quantity
from kubesim.resources import Obj

# The kubelet reports the API server's version unless the inventory says otherwise.
DEFAULT_KUBELET_VERSION = f"v{API_MAJOR}.{API_MINOR}.0"
DEFAULT_OS_IMAGE = "Ubuntu 22.04.4 LTS"
DEFAULT_KERNEL = "5.15.0-105-generic"
DEFAULT_RUNTIME = "containerd://1.7.13"
NODE_CIDR = ipaddress.ip_network("10.0.0.0/16")  # InternalIPs: 10.0.0.11, 10.0.0.12, ...
POD_CIDR = ipaddress.ip_network("10.244.0.0/16")  # each node gets a /24 of it


class InventoryError(ValueError):
    pass


@dataclass
class MigSpec:
    strategy: str  # "mixed" or "single"
    layouts: list[dict[str, int]]  # per GPU: profile -> instances


@dataclass
class SharingSpec:
    """Time-slicing (or MPS) as the NVIDIA device plugin's config sets it: each GPU is
    advertised `replicas` times; renamed (renameByDefault) as nvidia.com/gpu.shared."""

    strategy: str  # "time-slicing" or "mps": GPU feature discovery's sharing-strategy label
    replicas: int
    renamed: bool = True

    @property
    def resource(self) -> str:
        return SHARED_RESOURCE if self.renamed else "nvidia.com/gpu"


SHARED_RESOURCE = "nvidia.com/gpu.shared"


@dataclass
class NodeSpec:
    name: str
    pool: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    cpu: Quantity
    memory: Quantity
    pods: int
    ephemeral_storage: Quantity
    internal_ip: str
    pod_cidr: str
    gpu_model: gpus.GpuModel | None = None
    gpu_count: int = 0
    gpu_memory_mib: int = 0
    driver_version: str = gpus.DRIVER_VERSION
    mig: MigSpec | None = None
    sharing: SharingSpec | None = None
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class AddressPoolSpec:
    name: str
    addresses: list[str]
    auto_assign: bool = True


@dataclass
class Inventory:
    nodes: list[NodeSpec]
    address_pools: dict[str, AddressPoolSpec]
    kubelet_version: str = DEFAULT_KUBELET_VERSION
    os_image: str = DEFAULT_OS_IMAGE
    container_runtime: str = DEFAULT_RUNTIME


def load_inventory(path: str) -> Inventory:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    return parse_inventory(data)


def _field(where: str, data: Obj, key: str, kind: type, default: Any = None) -> Any:
    value = data.get(key, default)
    if value is None:
        return None
    if kind is int and isinstance(value, bool):
        raise InventoryError(f"{where}.{key}: expected an integer")
    if not isinstance(value, kind):
        raise InventoryError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return value


def parse_taint(where: str, taint: Any) -> dict[str, str]:
    """`{key, value?, effect}` or the kubectl form `key[=value]:Effect`."""
    if isinstance(taint, str):
        if ":" not in taint:
            raise InventoryError(f"{where}: taint {taint!r} needs an effect (key[=value]:Effect)")
        kv, effect = taint.rsplit(":", 1)
        key, _, value = kv.partition("=")
        taint = {"key": key, "value": value, "effect": effect}
    if not isinstance(taint, dict) or not taint.get("key"):
        raise InventoryError(f"{where}: a taint needs a key")
    effect = taint.get("effect", "NoSchedule")
    if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise InventoryError(f"{where}: taint effect {effect!r} is not NoSchedule, PreferNoSchedule or NoExecute")
    out = {"key": str(taint["key"]), "effect": effect}
    if taint.get("value"):
        out["value"] = str(taint["value"])
    return out


def _parse_mig(where: str, data: Any, model: gpus.GpuModel, count: int) -> MigSpec:
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: expected a mapping")
    strategy = data.get("strategy", "mixed")
    if strategy not in ("mixed", "single"):
        raise InventoryError(f"{where}.strategy: {strategy!r} is not mixed or single")
    if "layouts" in data:
        layouts = data["layouts"]
        if not isinstance(layouts, list) or len(layouts) != count:
            raise InventoryError(f"{where}.layouts: give one layout per GPU ({count})")
    elif "layout" in data:
        layouts = [data["layout"]] * count
    else:
        raise InventoryError(f"{where}: give layout (same for every GPU) or layouts (one per GPU)")
    parsed: list[dict[str, int]] = []
    for i, layout in enumerate(layouts):
        if not isinstance(layout, dict) or not layout:
            raise InventoryError(f"{where}.layouts[{i}]: expected a mapping profile -> count")
        try:
            gpus.validate_mig_layout(model, layout)
        except ValueError as exc:
            raise InventoryError(f"{where}: {exc}") from exc
        parsed.append({str(k): int(v) for k, v in layout.items()})
    if strategy == "single" and len({p for lay in parsed for p in lay}) != 1:
        raise InventoryError(f"{where}: the single strategy needs one profile on every GPU")
    return MigSpec(strategy, parsed)


def _parse_sharing(where: str, data: Any) -> SharingSpec:
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: expected a mapping")
    strategy = data.get("strategy", "time-slicing")
    if strategy not in ("time-slicing", "mps"):
        raise InventoryError(f"{where}.strategy: {strategy!r} is not time-slicing or mps")
    replicas = _field(where, data, "replicas", int)
    if replicas is None or replicas < 2:
        raise InventoryError(f"{where}.replicas: give 2 or more replicas per GPU")
    renamed = data.get("renamed", True)
    if not isinstance(renamed, bool):
        raise InventoryError(f"{where}.renamed: expected true or false")
    return SharingSpec(str(strategy), replicas, renamed)


def parse_inventory(data: Obj) -> Inventory:
    if not isinstance(data, dict):
        raise InventoryError("inventory: expected a mapping")
    cluster = data.get("cluster") or {}
    inv = Inventory(
        nodes=[],
        address_pools={},
        kubelet_version=str(cluster.get("kubeletVersion", DEFAULT_KUBELET_VERSION)),
        os_image=str(cluster.get("osImage", DEFAULT_OS_IMAGE)),
        container_runtime=str(cluster.get("containerRuntimeVersion", DEFAULT_RUNTIME)),
    )
    pools = data.get("nodePools") or []
    if not isinstance(pools, list):
        raise InventoryError("nodePools: expected a list")
    hosts = iter(NODE_CIDR.hosts())
    for _ in range(10):  # leave .1–.10 to routers and the control plane
        next(hosts)
    names: set[str] = set()
    for p, pool in enumerate(pools):
        where = f"nodePools[{p}]"
        if not isinstance(pool, dict):
            raise InventoryError(f"{where}: expected a mapping")
        pool_name = _field(where, pool, "name", str) or f"pool{p}"
        where = f"nodePools[{pool_name}]"
        count = _field(where, pool, "count", int, 1)
        prefix = _field(where, pool, "namePrefix", str) or f"{pool_name}-"
        labels = {str(k): str(v) for k, v in (_field(where, pool, "labels", dict) or {}).items()}
        taints = [parse_taint(f"{where}.taints", t) for t in (_field(where, pool, "taints", list) or [])]
        try:
            cpu = Quantity.parse(pool.get("cpu", 16))
            memory = Quantity.parse(pool.get("memory", "64Gi"))
            storage = Quantity.parse(pool.get("ephemeralStorage", "500Gi"))
        except ValueError as exc:
            raise InventoryError(f"{where}: {exc}") from exc
        max_pods = _field(where, pool, "pods", int, 110)
        gpu = _field(where, pool, "gpu", dict)
        model = None
        gpu_count = 0
        gpu_mem = 0
        mig = None
        sharing = None
        driver = gpus.DRIVER_VERSION
        if gpu:
            gwhere = f"{where}.gpu"
            try:
                model = gpus.lookup_model(str(gpu.get("model", "")))
            except KeyError as exc:
                raise InventoryError(f"{gwhere}.model: {exc.args[0]}") from exc
            gpu_count = _field(gwhere, gpu, "count", int, 1)
            gpu_mem = _field(gwhere, gpu, "memoryMiB", int, model.memory_mib)
            driver = str(gpu.get("driverVersion", gpus.DRIVER_VERSION))
            if gpu.get("mig") is not None:
                mig = _parse_mig(f"{gwhere}.mig", gpu["mig"], model, gpu_count)
            if gpu.get("sharing") is not None:
                if mig is not None:
                    raise InventoryError(f"{gwhere}: give mig or sharing, not both")
                sharing = _parse_sharing(f"{gwhere}.sharing", gpu["sharing"])
        for i in range(1, count + 1):
            name = f"{prefix}{i}"
            if name in names:
                raise InventoryError(f"{where}: node name {name!r} is used twice")
            names.add(name)
            n = len(inv.nodes)
            inv.nodes.append(NodeSpec(
                name=name,
                pool=pool_name,
                labels=dict(labels),
                taints=[dict(t) for t in taints],
                cpu=cpu,
                memory=memory,
                pods=max_pods,
                ephemeral_storage=storage,
                internal_ip=str(next(hosts)),
                pod_cidr=str(list(POD_CIDR.subnets(new_prefix=24))[n + 1]),
                gpu_model=model,
                gpu_count=gpu_count,
                gpu_memory_mib=gpu_mem,
                driver_version=driver,
                mig=mig,
                sharing=sharing,
                unschedulable=bool(pool.get("unschedulable", False)),
                annotations={str(k): str(v) for k, v in (pool.get("annotations") or {}).items()},
            ))
    for a, ap in enumerate(data.get("addressPools") or []):
        where = f"addressPools[{a}]"
        if not isinstance(ap, dict) or not ap.get("name"):
            raise InventoryError(f"{where}: needs a name")
        addresses = ap.get("addresses") or []
        if not isinstance(addresses, list) or not addresses:
            raise InventoryError(f"{where}.addresses: give a list of CIDRs, ranges or addresses")
        inv.address_pools[str(ap["name"])] = AddressPoolSpec(
            str(ap["name"]), [str(x) for x in addresses], bool(ap.get("autoAssign", True))
        )
    return inv


# --- Node objects ---------------------------------------------------------------------------


def resource_counts(spec: NodeSpec) -> dict[str, int]:
    """The extended resources the device plugin advertises on this node."""
    if spec.gpu_model is None or spec.gpu_count == 0:
        return {}
    if spec.sharing is not None:
        return {spec.sharing.resource: spec.gpu_count * spec.sharing.replicas}
    if spec.mig is None:
        return {"nvidia.com/gpu": spec.gpu_count}
    counts: dict[str, int] = {}
    for layout in spec.mig.layouts:
        for profile, n in layout.items():
            resource = "nvidia.com/gpu" if spec.mig.strategy == "single" else f"nvidia.com/mig-{profile}"
            counts[resource] = counts.get(resource, 0) + n
    return counts


def node_devices(spec: NodeSpec) -> list[gpus.Device]:
    if spec.gpu_model is None:
        return []
    devices: list[gpus.Device] = []
    for index in range(spec.gpu_count):
        gpu_uuid = "GPU-" + gpus.stable_uuid(spec.name, index)
        if spec.sharing is not None:
            devices.extend(gpus.Device(spec.name, index, gpu_uuid, spec.sharing.resource,
                                       spec.gpu_model, spec.gpu_memory_mib, replica=replica,
                                       driver_version=spec.driver_version)
                           for replica in range(spec.sharing.replicas))
            continue
        if spec.mig is None:
            devices.append(gpus.Device(spec.name, index, gpu_uuid, "nvidia.com/gpu", spec.gpu_model,
                                       spec.gpu_memory_mib, driver_version=spec.driver_version))
            continue
        instance = 0
        profiles = dict(spec.gpu_model.mig_profiles)
        for profile, n in spec.mig.layouts[index].items():
            resource = "nvidia.com/gpu" if spec.mig.strategy == "single" else f"nvidia.com/mig-{profile}"
            for _ in range(n):
                instance += 1
                devices.append(gpus.Device(
                    spec.name, index, gpu_uuid, resource, spec.gpu_model, profiles[profile],
                    mig_profile=profile, mig_instance=instance,
                    mig_uuid="MIG-" + gpus.stable_uuid(spec.name, index, profile, instance),
                    driver_version=spec.driver_version,
                ))
    return devices


def node_labels(spec: NodeSpec) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/worker": "",
        "kubesim.io/node-pool": spec.pool,
    }
    model = spec.gpu_model
    if model is not None and spec.gpu_count:
        major, minor, rev = (spec.driver_version.split(".") + ["0", "0"])[:3]
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": model.product,
            "nvidia.com/gpu.memory": str(spec.gpu_memory_mib),
            "nvidia.com/gpu.count": str(spec.gpu_count),
            "nvidia.com/gpu.family": model.family,
            "nvidia.com/gpu.compute.major": str(model.compute_major),
            "nvidia.com/gpu.compute.minor": str(model.compute_minor),
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.runtime.major": "12",
            "nvidia.com/cuda.runtime.minor": "2",
            "nvidia.com/mig.capable": "true" if model.mig_profiles else "false",
        })
        if spec.sharing is not None:
            # GPU feature discovery: the replicas and the strategy; the product gains -SHARED
            # only when the resource keeps its name (renamed, the resource name tells)
            labels["nvidia.com/gpu.replicas"] = str(spec.sharing.replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = spec.sharing.strategy
            if not spec.sharing.renamed:
                labels["nvidia.com/gpu.product"] = f"{model.product}-SHARED"
        if spec.mig is not None:
            profiles = dict(model.mig_profiles)
            labels["nvidia.com/mig.strategy"] = spec.mig.strategy
            # the MIG manager's layout name: all-<profile> when every GPU is cut alike
            uniform = {tuple(sorted(layout)) for layout in spec.mig.layouts}
            if len(uniform) == 1 and len(next(iter(uniform))) == 1:
                labels["nvidia.com/mig.config"] = f"all-{next(iter(uniform))[0]}"
                labels["nvidia.com/mig.config.state"] = "success"
            per_profile: dict[str, int] = {}
            for layout in spec.mig.layouts:
                for profile, n in layout.items():
                    per_profile[profile] = per_profile.get(profile, 0) + n
            if spec.mig.strategy == "single":
                (profile, n), = per_profile.items()
                # GFD rewrites the product and counts to describe the MIG devices.
                labels["nvidia.com/gpu.product"] = f"{model.product}-MIG-{profile}"
                labels["nvidia.com/gpu.count"] = str(n)
                labels["nvidia.com/gpu.memory"] = str(profiles[profile])
            for profile, n in per_profile.items():
                labels[f"nvidia.com/mig-{profile}.count"] = str(n)
                labels[f"nvidia.com/mig-{profile}.memory"] = str(profiles[profile])
                labels[f"nvidia.com/mig-{profile}.slices.gi"] = str(gpus.mig_slices(profile))
    labels.update(spec.labels)
    return labels


def _memory_ki(q: Quantity) -> str:
    return f"{int(q.value) // 1024}Ki"


def node_object(spec: NodeSpec, inv: Inventory, now: str) -> Obj:
    """The Node as its kubelet would register it."""
    capacity = {
        "cpu": str(spec.cpu),
        "memory": _memory_ki(spec.memory),
        "pods": str(spec.pods),
        "ephemeral-storage": _memory_ki(spec.ephemeral_storage),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    allocatable = dict(capacity)
    # The kubelet's default hard eviction threshold (memory.available<100Mi) is not allocatable.
    allocatable["memory"] = f"{max(0, int(spec.memory.value) - 100 * 2**20) // 1024}Ki"
    for resource, count in resource_counts(spec).items():
        capacity[resource] = allocatable[resource] = str(count)

    def condition(type_: str, status: str, reason: str, message: str) -> Obj:
        return {"type": type_, "status": status, "lastHeartbeatTime": now,
                "lastTransitionTime": now, "reason": reason, "message": message}

    machine = gpus.stable_uuid("machine", spec.name).replace("-", "")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": node_labels(spec),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                **spec.annotations,
            },
        },
        "spec": {
            "podCIDR": spec.pod_cidr,
            "podCIDRs": [spec.pod_cidr],
            **({"taints": [dict(t) for t in spec.taints]} if spec.taints else {}),
            **({"unschedulable": True} if spec.unschedulable else {}),
        },
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                          "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                          "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID",
                          "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": spec.internal_ip},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": gpus.stable_uuid("system", spec.name),
                "bootID": gpus.stable_uuid("boot", spec.name),
                "kernelVersion": DEFAULT_KERNEL,
                "osImage": inv.os_image,
                "containerRuntimeVersion": inv.container_runtime,
                "kubeletVersion": inv.kubelet_version,
                "kubeProxyVersion": inv.kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
