"""Whether the cluster serves an API group version (a CRD's): one discovery request per
cluster and group version, remembered for a minute (Kueue's, kube/kueue.py; the distributed
engines', kube/engines.py)."""

from __future__ import annotations

import threading
import time

from .client import Kube, KubeError, NotFound

DETECTED_SECONDS = 60

# the answer per (API server URL, group version): (served, asked at, monotonic). In the
# process, not in the shared cache: a launch must not depend on Redis (it may be restarting)
_served: dict[tuple[str, str], tuple[bool, float]] = {}
_served_lock = threading.Lock()


def api_served(api_version: str, kube: Kube | None = None, *, fresh: bool = False) -> bool:
    """Whether the cluster serves `api_version` ("group/version"). When the cluster does not
    answer, the last answer stands; with none, KubeError."""
    kube = kube or Kube()
    key = (kube.server, api_version)
    with _served_lock:
        known = _served.get(key)
    if known is not None and not fresh and time.monotonic() - known[1] < DETECTED_SECONDS:
        return known[0]
    try:
        kube.server_get(f"/apis/{api_version}")
        served = True
    except NotFound:
        served = False
    except KubeError:
        if known is None:
            raise
        return known[0]
    with _served_lock:
        _served[key] = (served, time.monotonic())
    return served


def forget() -> None:
    """Ask again next time (tests that install or remove an API)."""
    with _served_lock:
        _served.clear()
