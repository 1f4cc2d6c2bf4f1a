"""Whether distributed training can run here: the engine's API (JobSet's, the MPI operator's)
and Kueue, which admits a group whole (gang admission). Detected like Kueue (kube/kueue.py):
"auto", one discovery request per API, remembered for a minute. kubesim serves neither.
"""

from __future__ import annotations

from .client import Kube, KubeError
from .discovery import api_served
from .kueue import queueing_on

# engine (catalogue Template.engine) → the API its objects are made in, and what provides it
ENGINE_APIS = {"jobset": "jobset.x-k8s.io/v1alpha2", "mpi": "kubeflow.org/v2beta1"}
ENGINE_NAMES = {"jobset": "JobSet (sigs.k8s.io/jobset)",
                "mpi": "the MPI operator (kubeflow.org MPIJob)"}


def engine_refusal(engine: str, kube: Kube | None = None) -> str | None:
    """Why a workload of `engine` cannot run on this cluster now, or None when it can. A
    cluster that does not answer is not a reason: the launch waits for it like any other."""
    if not engine:
        return None
    kube = kube or Kube()
    try:
        if not api_served(ENGINE_APIS[engine], kube):
            return (f"Distributed training is unavailable: this cluster does not run "
                    f"{ENGINE_NAMES[engine]} (its API {ENGINE_APIS[engine]} is not served). "
                    "An admin can install it beside Kueue (docs/operator-guide.md).")
        if not queueing_on(kube):
            return ("Distributed training is unavailable: it needs Kueue, which admits every "
                    "rank of a group at once or none, and this cluster does not queue on "
                    "Kueue (PORTAL_QUEUEING).")
    except KubeError:
        return None
    return None


def engines_served(kube: Kube | None = None) -> dict[str, bool]:
    """Per engine, whether its API is served (False when the cluster does not answer)."""
    kube = kube or Kube()
    served = {}
    for engine, api in ENGINE_APIS.items():
        try:
            served[engine] = api_served(api, kube)
        except KubeError:
            served[engine] = False
    return served
