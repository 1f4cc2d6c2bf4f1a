"""Whether launches queue on Kueue: the mode, and whether the cluster serves Kueue's API.

The mode (`PORTAL_QUEUEING`): "auto" (the default) queues where the cluster serves Kueue's API,
"kueue" insists on it, "off" keeps the portal's own admission (refuse what is over quota) on
any cluster. Detection is one discovery request, remembered for a minute.
"""

from __future__ import annotations

from django.conf import settings

from .client import Kube, KubeError
from .discovery import api_served
from .labels import KUEUE_API_VERSION as API_VERSION

MODES = ("auto", "kueue", "off")


def kueue_served(kube: Kube | None = None, *, fresh: bool = False) -> bool:
    """Whether the cluster serves Kueue's API (its CRDs are installed); asked once a minute.
    When the cluster does not answer, the last answer stands (a launch must not be created
    outside the queue because one discovery request failed); with none, KubeError."""
    return api_served(API_VERSION, kube, fresh=fresh)


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
