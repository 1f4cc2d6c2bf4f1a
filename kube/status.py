"""Whether the cluster answers, as every process of the portal last saw it.

Any process that fails to reach the Kubernetes API records the outage in the shared cache
(Redis); the periodic probe (`client.cluster_probe`, run by `portal.tasks.cluster_probe_task`
and /readyz) records both outages and recoveries, so a page can say "the cluster is
unreachable" with one cache read instead of asking the cluster itself. A record expires by itself: if nobody has seen the
cluster fail for `RECORD_SECONDS`, the pages stop saying so.

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
# a process that recorded an outage clears it at its next successful call (others wait for
# the probe); kept per process so that successful calls cost no cache write
_recorded_here = False


@dataclasses.dataclass(frozen=True)
class ClusterOutage:
    error: str
    since: datetime.datetime  # the first failure of this outage


def cluster_outage() -> ClusterOutage | None:
    """The outage being recorded, or None (the cluster answers, or nobody knows)."""
    try:
        record = cache.get(KEY)
    except Exception:  # noqa: BLE001 - Redis down: the status is unknown, the page still renders
        return None
    if not record:
        return None
    return ClusterOutage(error=record["error"],
                         since=datetime.datetime.fromisoformat(record["since"]))


def record_unreachable(error: str) -> None:
    """Record that the cluster did not answer; an ongoing outage keeps its start time."""
    global _recorded_here
    try:
        current = cache.get(KEY)
        since = current["since"] if current else timezone.now().isoformat()
        cache.set(KEY, {"error": error[:300], "since": since}, RECORD_SECONDS)
        _recorded_here = True
    except Exception:  # noqa: BLE001 - the cluster outage is the news; a cache outage is not
        log.warning("could not record the cluster outage (cache unavailable)")


def record_reachable(*, force: bool = False) -> None:
    """The cluster answered: end the recorded outage (one cache write only when needed)."""
    global _recorded_here
    if not (force or _recorded_here):
        return
    try:
        cache.delete(KEY)
        _recorded_here = False
    except Exception:  # noqa: BLE001
        log.warning("could not clear the cluster outage (cache unavailable)")
