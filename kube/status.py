"""Whether the cluster answers, as every process of the portal last saw it.

Any process that fails to reach the Kubernetes API records the outage in the shared cache
(Redis); the periodic probe (`client.cluster_probe`, run by `portal.tasks.cluster_probe_task`
and /readyz) records both outages and recoveries, so a page can say "the cluster is
unreachable" with one cache read instead of asking the cluster itself. A record expires by itself: if nobody has seen the
cluster fail for `RECORD_SECONDS`, the pages stop saying so.

Each cluster the portal reaches has its own record: the home cluster's (the one the portal runs
beside, `cluster` None) under KEY, which the banner reads; another cluster's under KEY and its
name (the clusters app turns them into each cluster's state).

A cache that cannot be reached makes the status unknown (None), never an error: pages must
keep rendering while Redis is down.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging

from django.core.cache import cache
from django.utils import timezone

log = logging.getLogger(__name__)

KEY = "cluster-outage"
# the probe runs every 15 s; an outage record outlives a few missed probes, no more
RECORD_SECONDS = 90
# the clusters (by their key) of which this process recorded an outage: it clears each at its
# next successful call there (others wait for the probe); kept per process so that successful
# calls cost no cache write
_recorded_here: set[str] = set()


@dataclasses.dataclass(frozen=True)
class ClusterOutage:
    error: str
    since: datetime.datetime  # the first failure of this outage


def _key(cluster: str | None) -> str:
    return f"{KEY}:{cluster}" if cluster else KEY


def cluster_outage(cluster: str | None = None) -> ClusterOutage | None:
    """The outage being recorded of the home cluster (or of the one named), or None (the
    cluster answers, or nobody knows)."""
    try:
        record = cache.get(_key(cluster))
    except Exception:  # noqa: BLE001 - Redis down: the status is unknown, the page still renders
        return None
    if not record:
        return None
    return ClusterOutage(error=record["error"],
                         since=datetime.datetime.fromisoformat(record["since"]))


def record_unreachable(error: str, cluster: str | None = None) -> None:
    """Record that the cluster did not answer; an ongoing outage keeps its start time."""
    key = _key(cluster)
    try:
        current = cache.get(key)
        since = current["since"] if current else timezone.now().isoformat()
        cache.set(key, {"error": error[:300], "since": since}, RECORD_SECONDS)
        _recorded_here.add(key)
    except Exception:  # noqa: BLE001 - the cluster outage is the news; a cache outage is not
        log.warning("could not record the cluster outage (cache unavailable)")


def record_reachable(cluster: str | None = None, *, force: bool = False) -> None:
    """The cluster answered: end the recorded outage (one cache write only when needed)."""
    key = _key(cluster)
    if not (force or key in _recorded_here):
        return
    try:
        cache.delete(key)
        _recorded_here.discard(key)
    except Exception:  # noqa: BLE001
        log.warning("could not clear the cluster outage (cache unavailable)")
