"""Whether GPU types claimed through dynamic resource allocation can run here: the cluster
serves resource.k8s.io/v1 (ResourceClaimTemplates, the scheduler's allocation of claims).
Detected like Kueue (kube/kueue.py): one discovery request, remembered for a minute. kubesim
serves no such API: a DRA type is refused there."""

from __future__ import annotations

from .client import Kube, KubeError
from .discovery import api_served

RESOURCE_API = "resource.k8s.io/v1"

# Dynamic resource allocation, as NVIDIA's DRA driver for GPUs names things. The driver is
# called `gpu.nvidia.com` and qualifies its device attributes and capacities with that name,
# so a CEL selector reads them as device.attributes['gpu.nvidia.com'].<name>. Each device it
# publishes has the attribute `type` ("gpu" for a whole GPU, "mig" for a MIG instance),
# `productName` (what NVML calls the board, spaces and all: "NVIDIA A100-SXM4-80GB", "Tesla
# T4", not GPU feature discovery's dashed label) and the capacity `memory` (bytes, binary
# units: a T4's is 15360Mi). The driver's chart installs two device classes selecting on
# driver and type: `gpu.nvidia.com` (type gpu) and `mig.nvidia.com` (type mig).
DRA_DRIVER = "gpu.nvidia.com"
DRA_GPU_CLASS = "gpu.nvidia.com"
DRA_MIG_CLASS = "mig.nvidia.com"
DRA_DEVICE_TYPES = {DRA_GPU_CLASS: "gpu", DRA_MIG_CLASS: "mig"}


def dra_refusal(kube: Kube | None = None) -> str | None:
    """Why a DRA GPU type cannot run on this cluster now, or None when it can. A cluster that
    does not answer is not a reason: the launch waits for it like any other."""
    try:
        if api_served(RESOURCE_API, kube or Kube()):
            return None
    except KubeError:
        return None
    return (f"This cluster does not serve {RESOURCE_API} (dynamic resource allocation): a GPU "
            "type claimed through DRA cannot run here. Use a type placed by its extended "
            "resource, or ask an admin (docs/gpu-sharing.md).")
