"""Whether GPU types claimed through dynamic resource allocation can run here: the cluster
serves resource.k8s.io/v1 (ResourceClaimTemplates, the scheduler's allocation of claims).
Detected like Kueue (kube/kueue.py): one discovery request, remembered for a minute. kubesim
serves no such API: a DRA type is refused there."""

from __future__ import annotations

from .client import Kube, KubeError
from .discovery import api_served

RESOURCE_API = "resource.k8s.io/v1"


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
