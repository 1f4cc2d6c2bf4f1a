"""How a node's GPUs may be carved, and what a change of carving would make of it (pure: no I/O).

Two agents on a GPU node carve its GPUs, each steered by one node label:

- the GPU operator's MIG manager lays the node's GPUs out as `nvidia.com/mig.config` names
  (a key of its config file: `all-1g.10gb`, `all-balanced`, `all-disabled` …), then reports
  `nvidia.com/mig.config.state` (`pending`, `success`, `failed`). It can only act once no pod
  holds the GPUs. The device plugin then advertises the new instances (mixed strategy:
  `nvidia.com/mig-<profile>`; MIG off: `nvidia.com/gpu`) and GPU feature discovery relabels the
  node (`nvidia.com/mig-<profile>.count` …).
- the device plugin takes its config from the ConfigMap the GPU operator gives it, the entry
  named by the node label `nvidia.com/device-plugin.config`. The portal names the entry for
  time-slicing `replicas` ways `time-slicing-<replicas>` (`time-slicing-1`: no sharing); the
  operator's ConfigMap must hold those entries (docs/gpu-sharing.md shows one), each renaming
  the shared resource `nvidia.com/gpu.shared` (renameByDefault), as the demo's T4 node has it.

What a GPU can take under MIG is its geometry: per product, the profiles it offers and how many
instances of each fit on one GPU (NVIDIA's MIG user guide; the MIG manager's default config
names the `all-<profile>` layouts after them, and `all-balanced` mixes small and large ones).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from kube.quantity import parse_quantity

from .sharing import (
    LABEL_MIG_CONFIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING_STRATEGY,
    MIG_RESOURCE,
    REPLICA_STRATEGIES,
    physical_product,
)

LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_CAPABLE = "nvidia.com/mig.capable"
LABEL_DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"
MIG_DISABLED = "all-disabled"
MIG_BALANCED = "all-balanced"
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MAX_REPLICAS = 64  # a unit finer than 1/64 of a GPU is not one the catalogue takes
DEVICE_PLUGIN_CONFIG_PREFIX = "time-slicing-"
_MIG_CONFIG = re.compile(r"^all-(?P<profile>\d+g\.\d+gb)$")


@dataclasses.dataclass(frozen=True)
class Geometry:
    """What one GPU of a product can hold under MIG: profile → instances per GPU (one profile
    alone), and the balanced mix."""

    name: str
    profiles: Mapping[str, int]
    balanced: Mapping[str, int]


A100_80GB = Geometry("A100/H100 80GB",
                     {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1,
                      "7g.80gb": 1},
                     {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
A100_40GB = Geometry("A100 40GB",
                     {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1,
                      "7g.40gb": 1},
                     {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1})
H200_141GB = Geometry("H200 141GB",
                      {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
                       "7g.141gb": 1},
                      {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
A30_24GB = Geometry("A30 24GB", {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1},
                    {"1g.6gb": 2, "2g.12gb": 1})


def geometry(product: str, memory_mib: int) -> Geometry | None:
    """The MIG geometry of a GPU by its product label and memory (MiB); None: no MIG."""
    if "A30" in product:
        return A30_24GB
    if "H200" in product:
        return H200_141GB
    if "A100" in product:
        return A100_80GB if memory_mib > 48 * 1024 or "80GB" in product else A100_40GB
    if "H100" in product or "H800" in product:
        return A100_80GB
    return None


@dataclasses.dataclass(frozen=True)
class Target:
    """A node's layout to be: a MIG config, or time-slicing `replicas` ways."""

    mig_config: str = ""
    replicas: int = 0

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Target:
        return cls(mig_config=str(data.get("mig_config") or ""),
                   replicas=int(data.get("replicas") or 0))

    def as_json(self) -> dict[str, Any]:
        return {"mig_config": self.mig_config} if self.mig_config else {"replicas": self.replicas}

    @property
    def label(self) -> tuple[str, str]:
        """The node label that asks for it: (key, value)."""
        if self.mig_config:
            return LABEL_MIG_CONFIG, self.mig_config
        return LABEL_DEVICE_PLUGIN_CONFIG, device_plugin_config(self.replicas)

    @property
    def text(self) -> str:
        if self.mig_config:
            return f"MIG {self.mig_config}"
        return "no time-slicing" if self.replicas == 1 else f"time-sliced {self.replicas} ways"


def device_plugin_config(replicas: int) -> str:
    """The device plugin's config entry for time-slicing `replicas` ways."""
    return f"{DEVICE_PLUGIN_CONFIG_PREFIX}{replicas}"


def replicas_of_config(name: str) -> int | None:
    """The replicas a device plugin config entry the portal names stands for (None: not one)."""
    rest = name.removeprefix(DEVICE_PLUGIN_CONFIG_PREFIX)
    if rest == name or not rest.isdigit() or not 1 <= int(rest) <= MAX_REPLICAS:
        return None
    return int(rest)


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    return labels


def gpu_count(node: Mapping[str, Any]) -> int:
    count = _labels(node).get(LABEL_GPU_COUNT, "0")
    return int(count) if count.isdigit() else 0


def node_geometry(node: Mapping[str, Any]) -> Geometry | None:
    labels = _labels(node)
    memory = labels.get(LABEL_GPU_MEMORY, "0")
    return geometry(physical_product(labels.get(LABEL_PRODUCT, "")),
                    int(memory) if memory.isdigit() else 0)


def is_gpu_resource(name: str) -> bool:
    """Whether a node resource is one a layout changes: whole, shared or MIG GPUs."""
    return name in (GPU_RESOURCE, SHARED_RESOURCE) or bool(MIG_RESOURCE.match(name))


def node_units(node: Mapping[str, Any]) -> dict[str, int]:
    """The GPU units a node advertises now: {resource: units} (its allocatable)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {name: int(parse_quantity(value)) for name, value in sorted(allocatable.items())
            if is_gpu_resource(name) and int(parse_quantity(value))}


def mig_layout(config: str, found: Geometry) -> dict[str, int]:
    """One GPU's instances under a MIG config: {profile: instances}; {} for MIG off.
    ValueError when the GPU cannot take it."""
    if config == MIG_DISABLED:
        return {}
    if config == MIG_BALANCED:
        return dict(found.balanced)
    match = _MIG_CONFIG.match(config)
    if match is None or match["profile"] not in found.profiles:
        offered = ", ".join(f"all-{p}" for p in found.profiles)
        raise ValueError(f"A {found.name} GPU has no MIG layout {config!r}: one of {offered}, "
                         f"{MIG_BALANCED} or {MIG_DISABLED}.")
    profile = match["profile"]
    return {profile: found.profiles[profile]}


def target_units(node: Mapping[str, Any], target: Target) -> dict[str, int]:
    """The units the node would advertise under `target`: {resource: units}. ValueError (its
    message says why, in words for the admin) when its GPUs cannot take it."""
    name = (node.get("metadata") or {}).get("name", "?")
    count = gpu_count(node)
    labels = _labels(node)
    if not count:
        raise ValueError(f"{name} reports no GPUs to lay out.")
    mig_on = bool(labels.get(LABEL_MIG_CONFIG)) and labels.get(LABEL_MIG_CONFIG) != MIG_DISABLED
    if target.mig_config:
        found = node_geometry(node)
        if found is None:
            raise ValueError(f"{name}'s GPUs ({physical_product(labels.get(LABEL_PRODUCT, ''))}) "
                             "cannot be partitioned with MIG.")
        if labels.get(LABEL_SHARING_STRATEGY) in REPLICA_STRATEGIES \
                and labels.get(LABEL_REPLICAS, "1") != "1":
            raise ValueError(f"{name} is time-sliced: lay it out with 1 replica before MIG.")
        layout = mig_layout(target.mig_config, found)
        if not layout:
            return {GPU_RESOURCE: count}
        return {f"nvidia.com/mig-{profile}": n * count for profile, n in sorted(layout.items())}
    if not 1 <= target.replicas <= MAX_REPLICAS:
        raise ValueError(f"Replicas from 1 to {MAX_REPLICAS}.")
    if mig_on:
        raise ValueError(f"{name}'s GPUs are in MIG mode ({labels[LABEL_MIG_CONFIG]}): lay it "
                         f"out as {MIG_DISABLED} before time-slicing it.")
    if target.replicas == 1:
        return {GPU_RESOURCE: count}
    return {SHARED_RESOURCE: count * target.replicas}


def units_text(units: Mapping[str, int]) -> str:
    """"14 × 1g.10gb", "16 × nvidia.com/gpu.shared", "2 × nvidia.com/gpu", "none"."""
    parts = []
    for resource, n in sorted(units.items()):
        mig = MIG_RESOURCE.match(resource)
        parts.append(f"{n} × {mig['profile'] if mig else resource}")
    return " + ".join(parts) or "none"


def change_text(node: Mapping[str, Any], target: Target) -> str:
    """"gpu-a100-mig-1: 14 × 1g.10gb → 6 × 2g.20gb (MIG all-2g.20gb)"."""
    name = (node.get("metadata") or {}).get("name", "?")
    return (f"{name}: {units_text(node_units(node))} → {units_text(target_units(node, target))} "
            f"({target.text})")


def applied(node: Mapping[str, Any], target: Target) -> tuple[bool, str]:
    """Whether the node runs `target` now, as the MIG manager and the device plugin report it:
    (True, "") when it does; (False, why) when it failed for good (the MIG manager's state
    `failed`); (False, "") while it is still being applied."""
    labels = _labels(node)
    key, value = target.label
    if labels.get(key) != value:
        return False, ""
    want = target_units(node, target)
    have = node_units(node)
    if target.mig_config:
        state = labels.get(LABEL_MIG_CONFIG_STATE, "")
        if state == "failed":
            return False, (f"the MIG manager reports {LABEL_MIG_CONFIG_STATE}=failed for "
                           f"{target.mig_config}")
        return state == "success" and have == want, ""
    return have == want, ""
