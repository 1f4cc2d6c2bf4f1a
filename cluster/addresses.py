"""How many LoadBalancer addresses are free: MetalLB's IPAddressPools, as its controller counts
them (`status.availableIPv4/IPv6`: the pool's addresses less those assigned; kubesim publishes
its own pool the same way).

Which pools count: the one the portal names (PORTAL_LB_ADDRESS_POOL), else every pool MetalLB
may assign from unasked (`spec.autoAssign`, true unless set false). A cluster without MetalLB's
API (another load balancer) has no pools to read: `known` is False and nothing is refused on
that account. Read at most every POOLS_SECONDS per cluster, in the process (a launch must not
depend on Redis for it); while the cluster does not answer, the last answer stands (none:
unknown, for as long).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from django.conf import settings

from kube.client import Kube, KubeError, NotFound

POOLS_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class AddressPools:
    """The pools the portal's Services take addresses from: their size and what is free."""

    known: bool  # the cluster serves MetalLB's pools (and the portal's pool, if named, exists)
    total: int = 0
    free: int = 0
    names: tuple[str, ...] = ()


UNKNOWN = AddressPools(known=False)

_read: dict[str, tuple[AddressPools, float]] = {}
_lock = threading.Lock()


def pools_from(items: list[dict[str, Any]], wanted: str = "") -> AddressPools:
    """Pure: the count over IPAddressPool objects as the API server returns them."""
    chosen = [p for p in items if (p.get("metadata") or {}).get("name") == wanted] if wanted \
        else [p for p in items if (p.get("spec") or {}).get("autoAssign", True) is not False]
    if not chosen:
        return UNKNOWN
    free = assigned = 0
    for pool in chosen:
        status = pool.get("status") or {}
        free += int(status.get("availableIPv4") or 0) + int(status.get("availableIPv6") or 0)
        assigned += int(status.get("assignedIPv4") or 0) + int(status.get("assignedIPv6") or 0)
    return AddressPools(known=True, total=free + assigned, free=free,
                        names=tuple(sorted(p["metadata"]["name"] for p in chosen)))


def address_pools(kube: Kube | None = None, *, fresh: bool = False) -> AddressPools:
    """The pools now (remembered POOLS_SECONDS); UNKNOWN where the cluster has none to read."""
    try:
        kube = kube or Kube()
        server = kube.server
    except KubeError:  # no cluster configured, or its configuration unreadable
        return UNKNOWN
    with _lock:
        known = _read.get(server)
    if known is not None and not fresh and time.monotonic() - known[1] < POOLS_SECONDS:
        return known[0]
    try:
        items = kube.list("IPAddressPool")["items"]
        pools = pools_from(items, settings.PORTAL_LB_ADDRESS_POOL)
    except NotFound:  # no MetalLB API here
        pools = UNKNOWN
    except KubeError:
        if known is not None:
            return known[0]
        pools = UNKNOWN  # not asked again at once: a launch does not wait on it each time
    with _lock:
        _read[server] = (pools, time.monotonic())
    return pools


def address_pools_forget() -> None:
    """Ask again next time (a test's cluster that another test has changed)."""
    with _lock:
        _read.clear()
