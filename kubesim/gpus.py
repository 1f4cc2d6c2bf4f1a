"""Simulated NVIDIA GPUs: the model catalogue, per-device allocation, faults and telemetry traces.

A *device* is what the NVIDIA device plugin advertises to the kubelet: a whole GPU
(`nvidia.com/gpu`) or a MIG instance (`nvidia.com/mig-1g.10gb` in the "mixed" strategy, or
`nvidia.com/gpu` in the "single" strategy). The scheduler picks devices here when it binds a pod,
the metrics renderer reads samples here, and the control API injects faults here.

Telemetry is computed lazily: a sample is a pure function of (seed, device UUID, trace, step),
so the same seed gives the same traces, and nothing runs while nobody scrapes.
"""

from __future__ import annotations

import hashlib
import math
import uuid as uuidlib
from dataclasses import dataclass, field

DRIVER_VERSION = "535.154.05"
# XIDs the NVIDIA device plugin ignores when judging health: application errors
# (13 graphics engine exception, 31 MMU fault, 43 stopped app, 45 preemptive cleanup,
# 68 video decoder exception, 109 context switch timeout).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

# PCI bus numbers of the GPU slots of a typical 8-GPU SXM server, reused for smaller boxes.
_PCI_BUSES = (0x07, 0x0B, 0x48, 0x4C, 0x88, 0x8B, 0xC8, 0xCB, 0x0F, 0x13, 0x50, 0x54, 0x90, 0x93)


@dataclass(frozen=True)
class GpuModel:
    """What GPU feature discovery, nvidia-smi and DCGM say about one GPU model."""

    key: str  # inventory name, e.g. "A100-SXM4-80GB"
    product: str  # GFD label nvidia.com/gpu.product
    model_name: str  # DCGM modelName label
    memory_mib: int
    family: str  # GFD label nvidia.com/gpu.family
    compute_major: int
    compute_minor: int
    idle_watts: float
    max_watts: float
    # MIG profiles this model supports: profile -> memory MiB of one instance.
    mig_profiles: tuple[tuple[str, int], ...] = ()


CATALOGUE: dict[str, GpuModel] = {
    m.key.lower(): m
    for m in (
        GpuModel(
            "A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, "ampere",
            8, 0, 62.0, 400.0,
            (("1g.10gb", 9728), ("1g.20gb", 19968), ("2g.20gb", 19968), ("3g.40gb", 40192),
             ("4g.40gb", 40192), ("7g.80gb", 80384)),
        ),
        GpuModel(
            "A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB", 40960, "ampere",
            8, 0, 36.0, 250.0,
            (("1g.5gb", 4864), ("2g.10gb", 9984), ("3g.20gb", 20096), ("4g.20gb", 20096),
             ("7g.40gb", 40192)),
        ),
        GpuModel(
            "H100-SXM5-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, "hopper",
            9, 0, 72.0, 700.0,
            (("1g.10gb", 9856), ("1g.20gb", 19968), ("2g.20gb", 19968), ("3g.40gb", 40320),
             ("4g.40gb", 40320), ("7g.80gb", 80896)),
        ),
        GpuModel("A30", "NVIDIA-A30", "NVIDIA A30", 24576, "ampere", 8, 0, 32.0, 165.0,
                 (("1g.6gb", 5836), ("2g.12gb", 11904), ("4g.24gb", 24064))),
        GpuModel("V100-SXM2-32GB", "Tesla-V100-SXM2-32GB", "Tesla V100-SXM2-32GB", 32768,
                 "volta", 7, 0, 42.0, 300.0),
        GpuModel("V100-PCIE-16GB", "Tesla-V100-PCIE-16GB", "Tesla V100-PCIE-16GB", 16384,
                 "volta", 7, 0, 36.0, 250.0),
        GpuModel("T4", "Tesla-T4", "Tesla T4", 15360, "turing", 7, 5, 10.0, 70.0),
        GpuModel("L4", "NVIDIA-L4", "NVIDIA L4", 23034, "ada-lovelace", 8, 9, 16.0, 72.0),
    )
}


def lookup_model(name: str) -> GpuModel:
    """Find a catalogue model by its key ("A100-SXM4-80GB"), product label or model name."""
    wanted = name.strip().lower()
    for model in CATALOGUE.values():
        if wanted in (model.key.lower(), model.product.lower(), model.model_name.lower()):
            return model
    raise KeyError(f"unknown GPU model {name!r}; known: {', '.join(sorted(m.key for m in CATALOGUE.values()))}")


def stable_uuid(*parts: object) -> str:
    """A UUID derived from its parts, so a node's GPUs keep their identity across restarts."""
    digest = hashlib.sha1("/".join(str(p) for p in parts).encode()).digest()
    return str(uuidlib.UUID(bytes=digest[:16], version=4))


def pci_bus_id(index: int) -> str:
    return f"00000000:{_PCI_BUSES[index % len(_PCI_BUSES)]:02X}:00.0"


@dataclass
class Holder:
    namespace: str
    pod: str
    container: str
    trace: str
    since: float  # loop time the pod got the device; traces are measured from here


@dataclass
class Sample:
    util: float
    mem_copy_util: float
    fb_used_mib: int
    temp_c: float
    power_w: float


@dataclass
class Device:
    """One schedulable GPU or MIG instance on a node."""

    node: str
    index: int  # the physical GPU's index on the node (label `gpu`, device `nvidiaN`)
    uuid: str  # GPU-… (whole GPU, also the parent UUID of MIG instances in metrics)
    resource: str  # nvidia.com/gpu or nvidia.com/mig-<profile>
    model: GpuModel
    memory_mib: int
    mig_profile: str | None = None
    mig_instance: int | None = None  # GPU instance id of a MIG device
    mig_uuid: str | None = None  # MIG-… device id the device plugin hands out
    # a time-sliced replica's number on its GPU (None: not time-sliced); the device plugin
    # hands out replicas as "<GPU uuid>::<replica>"
    replica: int | None = None
    driver_version: str = DRIVER_VERSION
    holder: Holder | None = None
    # Faults injected through the control API.
    xid: int = 0
    ecc_dbe: int = 0
    lost: bool = False
    # Lazily advanced telemetry state.
    energy_mj: float = 0.0
    energy_at: float | None = None
    trace_step: int = -1
    sample: Sample | None = field(default=None, repr=False)

    @property
    def device_id(self) -> str:
        """The id the device plugin reports (pod-resources API): GPU-…, MIG-… or, for a
        time-sliced replica, GPU-…::<replica>."""
        if self.replica is not None:
            return f"{self.uuid}::{self.replica}"
        return self.mig_uuid or self.uuid

    @property
    def healthy(self) -> bool:
        """What the device plugin advertises: a lost GPU, or one with a critical XID, is
        unhealthy and leaves the node's allocatable count (application XIDs do not)."""
        return not self.lost and (self.xid == 0 or self.xid in APPLICATION_XIDS)

    def slices(self) -> int:
        """Compute slices a MIG profile takes ("3g.40gb" → 3); a whole GPU is 7."""
        if self.mig_profile is None:
            return 7
        return int(self.mig_profile.split("g", 1)[0])


TRACES = ("busy", "idle", "bursty", "ramp")


def _unit(seed: int, *parts: object) -> float:
    """A deterministic pseudo-random number in [0, 1) for (seed, parts)."""
    digest = hashlib.blake2b(f"{seed}/{'/'.join(map(str, parts))}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def trace_util(trace: str, seed: int, device_id: str, step: int) -> float:
    """GPU utilisation (%) of an allocated device at sample `step` of its trace."""
    noise = _unit(seed, device_id, step, "util")
    if trace == "idle":
        return round(noise * 1.5, 1)  # below the 2 % that idle culling looks for
    if trace == "bursty":
        # Bursts of work lasting a few samples, separated by near-idle gaps.
        phase = _unit(seed, device_id, step // 4, "burst")
        return round(75 + noise * 25 if phase < 0.45 else noise * 8, 1)
    if trace == "ramp":
        # Warms up over the first 30 samples (data loading, compilation), then plateaus.
        level = min(1.0, step / 30)
        return round(5 + 85 * level + noise * 8, 1)
    # busy (the default): a training loop, with a dip every so often (checkpointing).
    dip = _unit(seed, device_id, step, "dip") < 0.08
    return round(30 + noise * 20 if dip else 88 + noise * 12, 1)


def sample_for(device: Device, seed: int, step: int) -> Sample:
    """The telemetry of a device at a step: a function of seed, device and holder's trace."""
    model = device.model
    tdp_share = device.slices() / 7
    if device.holder is None:
        # Free GPUs: nothing runs, memory holds only the driver's reservation.
        jitter = _unit(seed, device.device_id, step, "free")
        return Sample(0.0, 0.0, 0, round(29 + jitter * 3, 1),
                      round(model.idle_watts * tdp_share * (0.95 + jitter * 0.1), 2))
    trace = device.holder.trace if device.holder.trace in TRACES else "busy"
    util = trace_util(trace, seed, device.device_id, step)
    if trace == "idle":
        # Something is loaded (a notebook kernel) but nothing runs.
        fb_used = int(device.memory_mib * 0.04) + int(_unit(seed, device.device_id, "mem") * 300)
    else:
        base = 0.55 + _unit(seed, device.device_id, "mem") * 0.35
        fb_used = int(device.memory_mib * min(0.97, base * (0.3 + 0.7 * util / 100)))
    mem_copy = round(util * (0.35 + 0.3 * _unit(seed, device.device_id, step, "copy")), 1)
    temp = round(32 + util * 0.42 + _unit(seed, device.device_id, step, "temp") * 2, 1)
    span = model.max_watts - model.idle_watts
    power = round((model.idle_watts + span * (util / 100) * 0.92) * tdp_share, 2)
    return Sample(util, mem_copy, fb_used, temp, power)


class GpuRegistry:
    """All devices of the cluster, indexed for the scheduler, the metrics and the control API."""

    def __init__(self, seed: int = 0, interval: float = 5.0):
        self.seed = seed
        self.interval = max(interval, 0.001)
        self.devices: dict[tuple[str, str], list[Device]] = {}  # (node, resource) -> devices
        self.by_node: dict[str, list[Device]] = {}
        self.by_pod: dict[tuple[str, str], list[Device]] = {}

    def add_node(self, node: str, devices: list[Device]) -> None:
        self.remove_node(node)
        self.by_node[node] = devices
        for device in devices:
            self.devices.setdefault((node, device.resource), []).append(device)

    def remove_node(self, node: str) -> None:
        for device in self.by_node.pop(node, []):
            self.devices.pop((node, device.resource), None)
            if device.holder is not None:
                self.by_pod.pop((device.holder.namespace, device.holder.pod), None)

    def healthy_count(self, node: str, resource: str) -> int:
        return sum(1 for d in self.devices.get((node, resource), ()) if d.healthy)

    def free_count(self, node: str, resource: str) -> int:
        return sum(1 for d in self.devices.get((node, resource), ()) if d.healthy and d.holder is None)

    def allocate(self, node: str, namespace: str, pod: str, wants: dict[str, list[tuple[str, int]]],
                 trace: str, now: float) -> list[Device]:
        """Give a pod devices: `wants` maps a resource to [(container, count), ...].

        Lowest free indices first, as the device plugin's default allocator does. Idempotent:
        a pod that already holds devices keeps them.
        """
        key = (namespace, pod)
        if key in self.by_pod:
            return self.by_pod[key]
        taken: list[Device] = []
        for resource, per_container in wants.items():
            free = [d for d in self.devices.get((node, resource), ()) if d.healthy and d.holder is None]
            for container, count in per_container:
                for device in free[:count]:
                    device.holder = Holder(namespace, pod, container, trace, now)
                    device.trace_step = -1
                    taken.append(device)
                free = free[count:]
        if taken:
            self.by_pod[key] = taken
        return taken

    def release(self, namespace: str, pod: str) -> bool:
        devices = self.by_pod.pop((namespace, pod), [])
        for device in devices:
            device.holder = None
            device.trace_step = -1
        return bool(devices)

    def find(self, node: str, index: int) -> list[Device]:
        """The devices of one physical GPU (one, or its MIG instances)."""
        return [d for d in self.by_node.get(node, ()) if d.index == index]

    def advance(self, device: Device, now: float) -> Sample:
        """Bring a device's sample and energy counter up to `now` and return the sample."""
        start = device.holder.since if device.holder else 0.0
        step = max(0, int((now - start) / self.interval))
        if device.sample is None or step != device.trace_step:
            device.sample = sample_for(device, self.seed, step)
            device.trace_step = step
        if device.energy_at is not None and now > device.energy_at:
            device.energy_mj += device.sample.power_w * (now - device.energy_at) * 1000.0
        device.energy_at = now
        return device.sample


def mig_slices(profile: str) -> int:
    match = profile.split("g.", 1)
    if len(match) != 2 or not match[0].isdigit():
        raise ValueError(f"bad MIG profile {profile!r} (expected like 1g.10gb)")
    return int(match[0])


def validate_mig_layout(model: GpuModel, layout: dict[str, int]) -> None:
    known = dict(model.mig_profiles)
    if not known:
        raise ValueError(f"{model.key} does not support MIG")
    used = 0
    for profile, count in layout.items():
        if profile not in known:
            raise ValueError(f"{model.key} has no MIG profile {profile!r}; known: {', '.join(known)}")
        used += mig_slices(profile) * int(count)
    if used > 7:
        raise ValueError(f"MIG layout {layout} needs {used} compute slices; a GPU has 7")


def fmt_float(value: float) -> str:
    """Prometheus sample value: integers without a trailing .0, as dcgm-exporter prints them."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(round(value, 3))
