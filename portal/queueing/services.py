"""Queueing on Kueue: whether it is on, the objects that make the portal's quotas Kueue's, and
what a tenant's queue may reach.

The mode (`PORTAL_QUEUEING`): "auto" (the default) queues where the cluster serves Kueue's API,
"kueue" insists on it, "off" keeps the portal's own admission (refuse what is over quota) on
any cluster. Detection is one discovery request, remembered for a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from decimal import Decimal
from typing import Any

from django.conf import settings

from portal.kube.client import Kube, KubeError, NotFound

from .kueue import (
    API_VERSION,
    FlavorSpec,
    QueueSpec,
    make_cluster_queue,
    make_local_queue,
    make_priority_classes,
    make_resource_flavors,
)

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


def flavor_specs() -> list[FlavorSpec]:
    from portal.workloads.models import GpuType

    return [FlavorSpec(slug=t.slug, resource=t.resource_name,
                       node_labels=tuple(sorted((t.node_selector or {}).items())))
            for t in GpuType.objects.filter(enabled=True).order_by("slug")]


def queue_spec(tenant, quota) -> QueueSpec:
    return QueueSpec(
        name=tenant.namespace, namespace=tenant.namespace,
        gpus=tuple(sorted(quota.gpus_by_type().items())),
        cpu=quota.cpu, memory_gb=quota.memory_gb,
        borrowing_limit=quota.gpu_borrowing_limit, lending_limit=quota.gpu_lending_limit,
        weight=f"{Decimal(str(quota.fair_share_weight)).normalize():f}")


def cluster_queueing_objects() -> list[dict[str, Any]]:
    """The cluster-wide objects: a ResourceFlavor per GPU type, the priority classes."""
    return make_resource_flavors(flavor_specs()) + make_priority_classes()


def tenant_queue_objects(tenant, quota) -> list[dict[str, Any]]:
    """A tenant's ClusterQueue and the LocalQueue in its namespace."""
    spec = queue_spec(tenant, quota)
    return [make_cluster_queue(spec, flavor_specs()), make_local_queue(spec)]


def gpu_reach(quota, gpu_slug: str) -> int | None:
    """The most GPUs of a type the tenant's queue can ever hold at once: its nominal quota plus
    what it may borrow (None: no borrowing limit, so only the cluster's size bounds it)."""
    if quota.gpu_borrowing_limit is None:
        return None
    return quota.gpus_by_type().get(gpu_slug, 0) + quota.gpu_borrowing_limit
