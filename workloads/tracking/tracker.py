"""Lifecycle tracking: the cluster's objects of every workload, followed by list + watch.

One tracker runs at a time (a cache lock). A cycle LISTs each watched kind once when it has no
current view of it, stores the list's resourceVersion in `TrackerCursor`, then WATCHes every
kind from the stored resourceVersion for most of the period (one streamed request per kind, in
threads, so a pod's phase change reaches the database within a moment). A 410 Expired relists
that kind. Its API cost per cycle is therefore one list (only when needed) and one watch per
kind, whatever the number of workloads: no per-object GETs, ever.

What it watches, all namespaces at once:
- pods, jobs, deployments, services labelled `app.kubernetes.io/managed-by=gpu-portal`, mapped
  to their workload by the `gpu-portal.io/workload-id` label;
- events. Events carry no labels of the object they are about, so no label selector can pick
  ours. They are mapped by the involved object's name instead: every object of a workload is
  named `wl-<id>-…` (a Deployment's ReplicaSet and pods and a Job's pods extend that name), and
  `naming.py` guarantees that prefix reads back to exactly one id. An event counts only when it
  is in that workload's own tenant namespace, so a look-alike name elsewhere is ignored. (Looking
  the involved object up by uid would miss ReplicaSets, which are not watched, and pods refused
  by quota, which never existed.) The cost is that every event of the cluster is streamed and
  dropped here when it is not ours; the request count does not change.

The view (an index of objects per workload id) lives in the tracker's memory. It survives from
one cycle to the next in the same process, and is trusted only while the stored cursors still
equal what this process last saw (no other process tracked in between) and it is younger than
`relist_seconds`; otherwise the cycle relists first. A relist is also when vanished workloads
are found (see `_sweep_vanished`).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from core.contention import retry_on_contention
from kube.client import Expired, Kube, KubeError

from ..lifecycle import Outcome, workload_outcome
from ..manifests import BATCH
from ..models import TrackerCursor, Workload
from .events import EventRecording
from .index import (
    CHUNK,
    LIVE,
    LOCK_KEY,
    PRIMARY,
    SELECTOR,
    WATCH_RESTARTS,
    WATCHED,
    Index,
    Obj,
)
from .orphans import OrphanCleanup
from .states import StateDerivation

log = logging.getLogger(__name__)

# how often one workload is derived again when another writer moves it in between (the create
# task, a stop); each attempt reads the row anew, so a few always suffice
MARK_ATTEMPTS = 3


@dataclasses.dataclass
class CycleStats:
    requests: int = 0  # Kubernetes API requests made (lists + watches + deletes)
    lists: int = 0
    watches: int = 0
    expired: int = 0  # 410s answered by a relist
    changes: int = 0  # workload state/reason changes written
    events: int = 0  # WorkloadEvent rows created or updated
    orphans: int = 0  # objects deleted because no live workload owns them
    vanished: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class Tracker(StateDerivation, EventRecording, OrphanCleanup):
    """Follows the cluster for the portal. Not thread-safe: one cycle at a time per instance
    (and, across processes, one at a time per cluster: `tracking_cycle` holds a lock)."""

    def __init__(self, kube: Kube | None = None, *, relist_seconds: float = 300.0,
                 clock_skew_seconds: float = 5.0,
                 failed_service_grace_seconds: float = 600.0) -> None:
        self.kube = kube or Kube()
        self.failed_service_grace = failed_service_grace_seconds
        self.index = Index()
        self.versions: dict[str, str] = {}  # kind → resourceVersion this view is at
        self.listed_at: dict[str, float] = {}  # kind → monotonic time of its last list
        self.relist_seconds = relist_seconds
        # how far apart the clocks of the processes writing `updated_at` may be
        self.clock_skew = clock_skew_seconds
        self._recorded: dict[str, int] = {}  # event uid → count already in the database
        self._deleted: set[str] = set()  # uids of orphans already deleted
        self.stats = CycleStats()

    # -- the cycle -------------------------------------------------------------------------

    def cycle(self, duration: float) -> CycleStats:
        """Bring the view up to date (relist what is stale), then watch for `duration`
        seconds, writing what changes as it arrives. Raises KubeError when the cluster cannot
        be reached (the view is then dropped, so the next cycle relists)."""
        self.stats = CycleStats()
        deadline = time.monotonic() + duration
        try:
            stored = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
            now = time.monotonic()
            stale = [kind for kind, resource in WATCHED.items()
                     if not self.versions.get(kind)
                     or stored.get(resource) != self.versions[kind]
                     or now - self.listed_at.get(kind, 0.0) >= self.relist_seconds]
            if stale:
                self.relist(stale)
            self._watch_until(deadline)
        except (KubeError, DatabaseError):
            # whatever we have may have missed changes, or holds changes the database did not
            # take: relist next time (and store no resourceVersion past them)
            self.versions.clear()
            raise
        finally:
            self._save_cursors()
        return self.stats

    def relist(self, kinds: Iterable[str]) -> None:
        """LIST the kinds (one request each), rebuild their part of the view, store their
        resourceVersions, and reconcile every workload they touch."""
        kinds = list(kinds)
        touched: set[int] = set()
        started_wall = timezone.now()
        events: list[Obj] = []
        for kind in kinds:
            listed = self.kube.list(kind, label_selector=None if kind == "Event" else SELECTOR)
            self.stats.requests += 1
            self.stats.lists += 1
            items = listed.get("items") or []
            touched |= self.index.replace(kind, items)
            self.versions[kind] = (listed.get("metadata") or {}).get("resourceVersion") or ""
            self.listed_at[kind] = time.monotonic()
            if kind == "Event":
                events = items
        self._save_cursors(kinds)
        if events:
            self._write(self._record_events, events)
        self._write(self._apply, touched)
        self._write(self._delete_orphans, None)
        for kind in PRIMARY.intersection(kinds):
            if self.versions.get(kind):
                self._write(self._sweep_vanished, kind, started_wall)

    def _watch_until(self, deadline: float) -> None:
        """Watch every kind from its resourceVersion until the deadline, in threads feeding
        one queue; this thread applies what arrives (it alone touches the database)."""
        inbox: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        restarts: dict[str, int] = defaultdict(int)
        running: dict[str, threading.Thread] = {}
        failure: KubeError | None = None

        def start(kind: str, least: float = 0.5) -> None:
            # the server's timeoutSeconds is whole seconds: round, so a watch ends within half
            # a second of the deadline
            remaining = deadline - time.monotonic()
            if remaining < least:
                return
            self.stats.requests += 1
            self.stats.watches += 1
            thread = threading.Thread(target=self._watch_one, daemon=True,
                                      name=f"watch-{WATCHED[kind]}",
                                      args=(kind, self.versions[kind], max(1, round(remaining)),
                                            inbox))
            running[kind] = thread
            thread.start()

        for kind in WATCHED:
            start(kind)
        while running:
            try:
                batch = [inbox.get(timeout=0.5)]
            except queue.Empty:
                if time.monotonic() > deadline + 15.0:
                    log.warning("watches did not end at their timeout; leaving them")
                    break
                continue
            while True:  # drain: what arrived together is applied together
                try:
                    batch.append(inbox.get_nowait())
                except queue.Empty:
                    break
            dirty: set[int] = set()
            events: list[Obj] = []
            tombstones: dict[int, Obj] = {}
            ended: list[tuple[str, Exception | None]] = []
            for kind, event_type, payload in batch:
                if event_type == "END":
                    ended.append((kind, payload))
                    continue
                rv = (payload.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.versions[kind] = rv
                if event_type == "BOOKMARK":
                    continue
                if event_type == "DELETED":
                    wid = self.index.remove(kind, payload)
                    if kind in PRIMARY and wid is not None:
                        tombstones[wid] = payload
                else:
                    wid = self.index.put(kind, payload)
                    if kind == "Event" and wid is not None:
                        events.append(payload)
                if wid is not None:
                    dirty.add(wid)
            if events:
                self._write(self._record_events, events)
            if dirty:
                self._write(self._apply, dirty, tombstones)
                self._write(self._delete_orphans, dirty)
            for kind, error in ended:
                running.pop(kind, None)
                if isinstance(error, Expired):
                    # the stream fell behind the server's history: relist, watch again
                    log.info("watch of %s expired (%s); relisting", WATCHED[kind], error)
                    self.stats.expired += 1
                    self.relist([kind])
                    start(kind)
                elif error is not None:
                    failure = failure or error  # type: ignore[assignment]
                elif restarts[kind] < WATCH_RESTARTS:
                    restarts[kind] += 1  # the server ended it early: carry on
                    start(kind, least=1.0)
        if failure is not None:
            raise failure

    def _watch_one(self, kind: str, version: str, timeout: int,
                   inbox: queue.Queue[tuple[str, str, Any]]) -> None:
        error: Exception | None = None
        try:
            for event_type, obj in self.kube.watch(
                    kind, label_selector=None if kind == "Event" else SELECTOR,
                    resource_version=version, timeout_seconds=timeout):
                inbox.put((kind, event_type, obj))
        except KubeError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - reported to the cycle, never lost in a thread
            error = KubeError(f"watch of {WATCHED[kind]} failed: {exc!r}")
        inbox.put((kind, "END", error))

    @staticmethod
    def _write(step, *args) -> None:
        """A step that writes to the database, run again when another writer's lock ends it
        (each step is idempotent: it re-reads what it writes). Lock contention must not cost a
        cycle: the changes it carries would wait for the next relist."""
        retry_on_contention(step, *args, what=f"tracker {step.__name__}")

    def _save_cursors(self, kinds: Iterable[str] | None = None) -> None:
        for kind in kinds or WATCHED:
            version = self.versions.get(kind)
            if version:
                retry_on_contention(
                    TrackerCursor.objects.update_or_create, resource=WATCHED[kind],
                    defaults={"resource_version": version}, what="tracker cursor")

    # -- workloads -------------------------------------------------------------------------

    def _rows(self, wids: Iterable[int]) -> dict[int, dict[str, Any]]:
        ids = sorted(wids)
        rows: dict[int, dict[str, Any]] = {}
        for start in range(0, len(ids), CHUNK):
            for row in Workload.objects.filter(pk__in=ids[start:start + CHUNK]).values(
                    "id", "state", "kind", "reason", "node", "address", "exit_code",
                    "started_at", "finished_at", "updated_at", "deleted_at",
                    "max_runtime_minutes", "tenant__namespace"):
                rows[row["id"]] = row
        return rows

    def _apply(self, wids: Iterable[int], tombstones: dict[int, Obj] | None = None) -> None:
        """Derive each workload's state from the view and write what changed."""
        tombstones = tombstones or {}
        for wid, first in self._rows(wids).items():
            row: dict[str, Any] | None = first
            for _ in range(MARK_ATTEMPTS):
                if row is None:
                    break
                observed = self.index.observed(wid, row["kind"], row["tenant__namespace"])
                primary = observed.job if row["kind"] == BATCH else observed.deployment
                outcome: Outcome | None
                if wid in tombstones and primary is None and row["state"] in LIVE:
                    outcome = self._vanished_outcome(row, observed, tombstones[wid])
                else:
                    outcome = workload_outcome(row["state"], observed)
                if outcome is None or self._mark(row, outcome):
                    break
                row = self._rows([wid]).get(wid)  # another writer moved it: read it again


# -- the periodic task and the command ---------------------------------------------------------

_trackers: dict[str, Tracker] = {}  # per kubeconfig: the view kept between cycles


def tracker() -> Tracker:
    """This process's tracker (its view survives between cycles of the same process)."""
    key = settings.KUBECONFIG or "in-cluster"
    if key not in _trackers:
        _trackers[key] = Tracker(
            relist_seconds=float(getattr(settings, "PORTAL_TRACKER_RELIST_SECONDS", 300)),
            failed_service_grace_seconds=float(
                getattr(settings, "PORTAL_TRACKER_FAILED_SERVICE_GRACE_SECONDS", 600)))
    return _trackers[key]


def tracking_cycle(*, duration: float, wait: float = 0.0,
                   instance: Tracker | None = None) -> CycleStats | None:
    """One cycle under the cluster-wide lock; None when another tracker holds it for longer
    than `wait` seconds (a periodic cycle waits a moment for the previous one to finish, so
    that the watches stay nearly continuous). Never raises for the cluster or the cache being
    away: logs, and the next cycle resumes or relists."""
    token = uuid.uuid4().hex
    give_up = time.monotonic() + wait
    try:
        # a crashed holder's lock expires on its own, shortly after its cycle would have ended
        while not cache.add(LOCK_KEY, token, timeout=int(duration) + 60):
            if time.monotonic() >= give_up:
                return None
            time.sleep(0.2)
    except Exception:  # noqa: BLE001 - the cache (Redis) is away: no lock, no cycle
        log.exception("tracker lock unavailable; skipping this cycle")
        return None
    instance = instance or tracker()
    try:
        stats = instance.cycle(duration)
        log.info("tracking cycle: %s", stats.as_dict())
        return stats
    except KubeError as exc:
        log.warning("tracking cycle stopped, the cluster is unavailable: %s", exc)
        instance.stats.errors += 1
        return instance.stats
    except (OperationalError, InterfaceError) as exc:
        # the database is down, or stayed locked through every retry: the view was dropped
        # (cycle), so the next cycle relists and loses nothing
        log.warning("tracking cycle stopped, the database is unavailable: %s", exc)
        instance.stats.errors += 1
        return instance.stats
    finally:
        try:
            if cache.get(LOCK_KEY) == token:
                cache.delete(LOCK_KEY)
        except Exception:  # noqa: BLE001 - it expires by itself
            log.warning("could not release the tracker lock; it expires by itself")
