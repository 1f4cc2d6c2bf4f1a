"""Whether launches queue on Kueue: the mode, and whether the cluster serves Kueue's API.

The mode (`PORTAL_QUEUEING`): "auto" (the default) queues where the cluster serves Kueue's API,
"kueue" insists on it, "off" keeps the portal's own admission (refuse what is over quota) on
any cluster. Detection is one discovery request, remembered for a minute.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from .client import Kube, KubeError, NotFound
from .labels import KUEUE_API_VERSION as API_VERSION

log = logging.getLogger(__name__)

DETECTED_SECONDS = 60
MODES = ("auto", "kueue", "off")


# the answer per cluster (API server URL): (served, asked at, monotonic). In the process, not in
# the shared cache: a launch must not depend on Redis (it may be restarting) for this answer
_served: dict[str, tuple[bool, float]] = {}
_served_lock = threading.Lock()


def kueue_served(kube: Kube | None = None, *, fresh: bool = False) -> bool:
    """Whether the cluster serves Kueue's API (its CRDs are installed); asked once a minute.
    When the cluster does not answer, the last answer stands (a launch must not be created
    outside the queue because one discovery request failed); with none, KubeError."""
    kube = kube or Kube()
    server = kube.server
    with _served_lock:
        known = _served.get(server)
    if known is not None and not fresh and time.monotonic() - known[1] < DETECTED_SECONDS:
        return known[0]
    try:
        kube.server_get(f"/apis/{API_VERSION}")
        served = True
    except NotFound:
        served = False
    except KubeError:
        if known is None:
            raise
        return known[0]
    with _served_lock:
        _served[server] = (served, time.monotonic())
    return served


def queueing_on(kube: Kube | None = None) -> bool:
    """Whether launches queue on Kueue (PORTAL_QUEUEING); may raise KubeError in "auto"."""
    mode = settings.PORTAL_QUEUEING
    if mode == "off":
        return False
    if mode == "kueue":
        return True
    return kueue_served(kube)


def queueing_shown(kube: Kube | None = None) -> bool | None:
    """For pages: whether queueing is on; None when the cluster cannot say now."""
    try:
        return queueing_on(kube)
    except KubeError:
        return None
