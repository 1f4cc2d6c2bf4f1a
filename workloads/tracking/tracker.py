"""Lifecycle tracking: the cluster's objects of every workload, followed through reflectors.

One reflector (kube/reflector.py) per watched kind, all namespaces at once, keeps the kind in
memory by list + watch:
- pods, jobs, deployments, services and ingresses labelled
  `app.kubernetes.io/managed-by=gpu-portal`, mapped to their workload by the
  `gpu-portal.io/workload-id` label;
- where the cluster serves them (kube/engines.py) and the portal has launched a distributed
  workload, JobSets and MPIJobs labelled the same way: a distributed workload's group, which is
  the workload (its primary object) as a Job is a batch workload's. The question is asked once
  per tracker, and only once such a workload exists: on a cluster without them (kubesim) the
  tracker makes no request more than before. A JobSet pod seen before (the tracker started
  before the first launch) starts the group reflectors there and then;
- the volumes' PersistentVolumeClaims labelled the same way (storage/): their phase, and the
  provisioner's warnings about them (events, below), reach each Volume's state
  (storage.services.volume_observe) in the same drain;
- events. Events carry no labels of the object they are about, so no label selector can pick
  ours. They are mapped by the involved object's name instead: every object of a workload is
  named `wl-<id>-…` (a Deployment's ReplicaSet and pods and a Job's pods extend that name), and
  `naming.py` guarantees that prefix reads back to exactly one id. An event counts only when it
  is in that workload's own tenant namespace, so a look-alike name elsewhere is ignored. Every
  event of the cluster is streamed; the store keeps only ours.

The reflectors' change callbacks file each object under its workload (index.py) and add the
workload's id to a set of dirty ids; one worker loop drains that set and calls `reconcile` once
per id, however many changes came for it meanwhile. `reconcile(workload_id)` derives the state
from the stores and writes it through workload_transition (states.py). The same loop records
events (events.py), deletes orphans (orphans.py) and, after a list of Jobs or Deployments, fails
the live workloads of that kind whose object is gone (only that kind: a 410 relists one kind at
a time). Its API cost is one list per kind (at start and after a 410) and one watch per kind
and watch period, whatever the number of workloads: no per-object GETs, ever.

Cursors: after every drain, each kind's resourceVersion up to which every change has been
written is stored in `TrackerCursor`, where it moved since it was last stored (those of one
drain in one transaction); a reflector moves its resourceVersion only after its callback ran,
so the cursor never passes an unwritten change. A tracker that stops (it lost
the lead) and starts again in the same process resumes every kind whose stored cursor still
equals where its store is, instead of listing; another kind (or a new process) lists.

Every enabled cluster other than the home one is followed by a tracker of its own, which the
home one runs beside it (its `peers`: started with it, stepped after it, stopped with it): each
judges the workloads whose objects it holds (states.tracking_cluster), with cursors of its own.
A peer judges the services placed on its cluster only. Batch and distributed work dispatched
to a worker through MultiKueue (the home cluster is its manager) is the home tracker's: its Job,
JobSet or MPIJob is the home cluster's object, whose status MultiKueue mirrors from the worker's
copy, and gives the state; its pods and events are on the worker, in that cluster's peer's
stores, which the home tracker reads them from (a peer passes every change of a pod or event on
to it). A peer watches neither Jobs nor groups: the worker's copies are MultiKueue's, to remove
when the manager's object goes, never the peer's to judge or to collect as orphans.

One tracker leads at a time: `track()` (the `track_workloads` command) holds a Redis lock as its
lease, renews it while leading, and stands by while another process holds it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, close_old_connections, connection, transaction

from clusters.models import home_cluster_name
from clusters.selectors import dispatch_workers
from core.contention import retry_on_contention
from kube.client import Kube, KubeError, cluster_client, home_cluster
from kube.discovery import api_served
from kube.engines import ENGINE_APIS
from kube.labels import MPI_ROLE_LABEL
from kube.reflector import Reflector, object_key
from storage.services import volume_observe

from ..lifecycle import (
    JOBSET_RESTART_LABEL,
    Observed,
    Outcome,
    group_ranks,
    workload_outcome,
)
from ..models import TrackerCursor, Workload
from .events import EventRecorder
from .index import (
    CLAIM_KIND,
    GROUP_KINDS,
    GROUP_WATCHED,
    LOCK_KEY,
    PRIMARY,
    RESOURCES,
    SELECTOR,
    VANISHED,
    WATCHED,
    Index,
    Obj,
    claim_of_event,
    namespace_of,
    workload_id_of,
)
from .orphans import OrphanCollector
from .states import (
    WorkloadRow,
    mark,
    mark_ranks,
    primary_kind,
    tracking_cluster,
    vanished_outcome,
    vanished_since,
    workload_rows,
)

log = logging.getLogger(__name__)

# how often one workload is derived again when another writer moves it in between (the create
# task, a stop); each attempt reads the row anew, so a few always suffice
MARK_ATTEMPTS = 3
# a sweep from the stores (no list) judges only workloads live for longer than the watches may
# lag behind the cluster
SWEEP_LAG_SECONDS = 30.0
STATS_EVERY_SECONDS = 15.0  # how often a leading tracker logs its counters
PEERS_EVERY_SECONDS = 15.0  # how often the home tracker looks for clusters registered or removed
# The least time between two drains. A burst of launches brings a stream of changes (each pod,
# Deployment, Kueue Workload and Event several times over); drained as each arrives, every
# drain's transactions took the database's write lock (on SQLite the one every writer of the
# portal waits for) and reconciled the same workloads again. A change after a quiet spell is
# written at once; within a stream, at most this much later.
DRAIN_GAP_SECONDS = 0.25
# what a peer passes on to the home tracker: the pods and events of the work dispatched there
FORWARDED = frozenset({"Pod", "Event"})


@dataclasses.dataclass
class TrackerStats:
    """What a tracker did since it started (its reflectors' requests included)."""
    requests: int = 0  # Kubernetes API requests made (lists + watches + deletes + discovery)
    lists: int = 0
    watches: int = 0
    expired: int = 0  # 410s answered by a relist
    reconciles: int = 0  # workloads derived
    changes: int = 0  # workload state/reason changes written
    ranks: int = 0  # distributed workloads' ranks written
    events: int = 0  # WorkloadEvent rows created or updated
    orphans: int = 0  # objects deleted because no live workload owns them
    volumes: int = 0  # volumes whose state their claim changed
    vanished: int = 0
    errors: int = 0  # drains the database refused, deletes refused
    failing: int = 0  # reflectors whose last try failed (the cluster does not answer)

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def _slim(obj: Obj) -> Obj | None:
    """What a store keeps of an object: events only when they are about a workload, and no
    object's managedFields (the portal never reads them; on a real API server they are close
    to half of every object)."""
    if obj.get("kind") == "Event" and workload_id_of(obj) is None and claim_of_event(obj) is None:
        return None
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


class Tracker:
    """Follows the cluster for the portal: reflectors feeding one reconcile per dirty workload.
    `start` starts the reflectors, `stop` stops them (their stores are kept, to resume from);
    `step` runs the worker loop once, in the calling thread, which alone writes to the
    database."""

    def __init__(self, kube: Kube | None = None, *, resync_seconds: float = 300.0,
                 clock_skew_seconds: float = 5.0,
                 failed_service_grace_seconds: float = 600.0,
                 watch_seconds: int = 30, cluster: str | None = None,
                 upstream: Tracker | None = None,
                 drain_gap_seconds: float = DRAIN_GAP_SECONDS) -> None:
        if kube is None and home_cluster(cluster) is not None:
            # another cluster's client made here, not in the reflectors' threads (its
            # connection is a row of the database, read in the caller's transaction); raises
            # KubeError where it cannot be made (its Secret unreadable)
            kube = Kube(cluster_client(cluster), cluster=cluster)
        self.kube = kube or Kube()
        # the cluster it follows: the workloads whose `cluster` is this one are its to judge
        # (tracking_cluster); the home cluster's also follows the volumes' claims
        self.cluster = (cluster if cluster is not None and home_cluster(cluster) is not None
                        else self.kube.cluster) or home_cluster_name()
        self.home = home_cluster(self.cluster) is None
        # the trackers of the other clusters, which the home one runs beside it; a peer's
        # `upstream` is the home tracker, which judges the work dispatched to its cluster
        self.peers: dict[str, Tracker] = {}
        self.upstream = upstream
        self._peers_followed = -PEERS_EVERY_SECONDS
        self.resync_seconds = resync_seconds
        # how far apart the clocks of the processes writing `updated_at` may be
        self.clock_skew = clock_skew_seconds
        self.watch_seconds = watch_seconds
        self.index = Index()
        self.events = EventRecorder()
        self.orphans = OrphanCollector(self.kube,
                                       failed_service_grace_seconds=failed_service_grace_seconds)
        self.reflectors: dict[str, Reflector] = {}
        # the work the callbacks leave for the worker, under one condition
        self._work = threading.Condition()
        self._dirty: set[int] = set()
        self._tombstones: dict[int, Obj] = {}  # workload id → its primary object, deleted
        self._new_events: dict[str, Obj] = {}  # key → event, to record
        self._listed: dict[str, float] = {}  # kind → when its last list began (wall clock)
        self._all_orphans = False  # a list came in: look at every object for orphans
        self._counts = TrackerStats()
        # resource → the cursor as stored (read at start, then as written): a drain writes only
        # the cursors that moved, not every kind's at every step (twice a second, idle or not)
        self._stored: dict[str, str] = {}
        self._resynced_at = time.monotonic()
        self.drain_gap = drain_gap_seconds
        self._drained_at = -drain_gap_seconds  # when `step` last drained (monotonic)
        self.running = False
        # the group kinds (JobSet, MPIJob) the cluster serves, once asked (None: not yet)
        self._groups_served: set[str] | None = None
        self._groups_seen = False  # a group's pod came: watch the groups (the worker's job)
        # the volumes' claims: the last seen of each (None: deleted), the provisioner's last
        # warning about each, and those to write at the next drain
        self._claims: dict[tuple[str, str], Obj | None] = {}
        self._claim_warnings: dict[tuple[str, str], str] = {}
        self._claims_dirty: set[tuple[str, str]] = set()

    # -- the reflectors ----------------------------------------------------------------------

    def start(self, *, wait: float = 60.0) -> None:
        """Start a reflector per kind (resuming where the stored cursor still matches this
        process's store) and wait up to `wait` seconds for their first lists."""
        if self.running:
            return
        stored = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
        self._counts = TrackerStats()
        self._stored = dict(stored)
        # a peer has no Jobs nor groups of its own to judge (see the module's docstring)
        kinds = ([*WATCHED, CLAIM_KIND, *self._group_kinds()] if self.home
                 else [kind for kind in WATCHED if kind != "Job"])
        for kind in kinds:
            self._make_reflector(kind, stored)
        self.running = True
        self._resynced_at = time.monotonic()
        for kind in kinds:
            self.reflectors[kind].start()
        deadline = time.monotonic() + wait
        if self.home:
            self.peers_follow(wait=wait)
        for kind in kinds:
            self.reflectors[kind].wait_synced(max(0.0, deadline - time.monotonic()))

    def peers_follow(self, *, wait: float = 0.0) -> None:
        """Run a tracker of each enabled cluster other than the home one beside this, the home
        cluster's (its `peers`, with its settings): made for a cluster registered or enabled
        since, dropped for one removed or disabled, started where stopped (waiting up to
        `wait` s for their first lists). Each watches its own cluster with reflectors of its
        own (a cluster that does not answer costs its reflectors' back-off, nothing else)."""
        self._peers_followed = time.monotonic()
        names = set(dispatch_workers())
        for name in sorted(set(self.peers) - names):
            self.peers.pop(name).stop()
        for name in sorted(names - set(self.peers)):
            try:
                self.peers[name] = Tracker(
                    cluster=name, resync_seconds=self.resync_seconds,
                    clock_skew_seconds=self.clock_skew,
                    failed_service_grace_seconds=self.orphans.failed_service_grace,
                    watch_seconds=self.watch_seconds, upstream=self)
            except KubeError as exc:
                log.warning("tracker of %s not started (tried again soon): %s", name, exc)
        deadline = time.monotonic() + wait
        for peer in self.peers.values():
            peer.start(wait=max(0.0, deadline - time.monotonic()))

    def _make_reflector(self, kind: str, stored: dict[str, str]) -> Reflector:
        old = self.reflectors.get(kind)
        resume = (old is not None and old.synced and old.resource_version is not None
                  and stored.get(self.resource(kind)) == old.resource_version)
        self.reflectors[kind] = reflector = Reflector(
            kind, kube=lambda: self.kube,
            label_selector=None if kind == "Event" else SELECTOR, project=_slim,
            watch_seconds=self.watch_seconds,
            on_change=(self._claim_changed if kind == CLAIM_KIND
                       else functools.partial(self._changed, kind)),
            on_list=functools.partial(self._list_done, kind),
            # a store kept from before: resumed from the cursor, or the base a list is
            # compared with (what it no longer has was deleted meanwhile)
            resource_version=old.resource_version if resume and old is not None else None,
            items=old.store() if old is not None else None)
        return reflector

    def _group_kinds(self, *, seen: bool = False) -> list[str]:
        """The group kinds to watch: those the cluster serves, asked once per tracker (one
        discovery request per engine, counted) and only once a distributed workload exists
        (or a group's pod was `seen`); [] until then, while the cluster does not answer, and
        on a peer."""
        if not self.home:
            return []
        if self._groups_served is None and (seen or _distributed_launched()):
            served = set()
            try:
                for engine, api in ENGINE_APIS.items():
                    self._counts.requests += 1
                    if api_served(api, self.kube, fresh=True):
                        served.add(GROUP_KINDS[engine])
            except KubeError as exc:
                log.warning("tracker: cannot tell whether JobSet and MPIJob are served: %s", exc)
                return []  # asked again at the next start or resync
            self._groups_served = served
        return sorted(self._groups_served or ())

    def _watch_groups(self) -> None:
        """Start watching the group kinds the cluster serves that are not watched yet (a
        distributed workload came after the tracker started)."""
        seen, self._groups_seen = self._groups_seen, False
        kinds = [k for k in self._group_kinds(seen=seen) if k not in self.reflectors]
        if not kinds:
            return
        stored = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
        for kind in kinds:
            self._make_reflector(kind, stored).start()

    def stop(self) -> None:
        """Stop the reflectors, write what they delivered, store the cursors. The stores are
        kept: a later `start` resumes from them."""
        if not self.running:
            return
        for peer in self.peers.values():
            peer.stop()
        for reflector in self.reflectors.values():
            reflector.stop()
        self.running = False
        try:
            self.drain()
        except DatabaseError as exc:
            log.warning("tracker stopped with changes unwritten (the next start lists): %s", exc)

    def _claim_changed(self, event_type: str, obj: Obj) -> None:
        """The claims' reflector's callback (its thread): keep the claim, mark it dirty."""
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        with self._work:
            self._claims[key] = None if event_type == "DELETED" else obj
            self._claims_dirty.add(key)
            self._work.notify()

    def _claim_event(self, event_type: str, event: Obj) -> bool:
        """An event about one of the volumes' claims: its warning kept (a Normal event after
        it, such as ProvisioningSucceeded, clears it), the claim marked dirty. True when it
        was one."""
        key = claim_of_event(event)
        if key is None:
            return False
        if event_type != "DELETED":
            with self._work:
                if event.get("type") == "Warning":
                    self._claim_warnings[key] = (f"{event.get('reason') or 'Warning'}: "
                                                 f"{event.get('message') or ''}").strip()
                else:
                    self._claim_warnings.pop(key, None)
                self._claims_dirty.add(key)
                self._work.notify()
        return True

    def _changed(self, kind: str, event_type: str, obj: Obj) -> None:
        """A reflector's callback (its thread): file the object, mark its workload dirty."""
        if kind == "Event" and self._claim_event(event_type, obj):
            return
        if event_type == "DELETED":
            wid = self.index.remove(kind, obj)
        else:
            wid = self.index.put(kind, obj)
        if wid is None:
            return
        if self.upstream is not None and kind in FORWARDED:
            self.upstream.forward(wid)  # it may be work dispatched here: the home one's
        if (kind == "Pod" and self._groups_served is None and event_type != "DELETED"
                and _group_pod(obj)):
            self._groups_seen = True  # the worker starts watching the groups
        with self._work:
            self._dirty.add(wid)
            if event_type == "DELETED" and kind in PRIMARY:
                self._tombstones[wid] = obj
            elif kind == "Event" and event_type != "DELETED":
                self._new_events[object_key(obj)] = obj
            self._work.notify()

    def forward(self, wid: int) -> None:
        """A peer's callback (its reflector's thread): a pod or event of workload `wid` changed
        on the peer's cluster."""
        with self._work:
            self._dirty.add(wid)
            self._work.notify()

    def _list_done(self, kind: str, started: float) -> None:
        with self._work:
            self._listed[kind] = started
            self._all_orphans = True
            self._work.notify()

    @property
    def stats(self) -> TrackerStats:
        counts = dataclasses.replace(self._counts)
        for reflector in self.reflectors.values():
            counts.lists += reflector.lists
            counts.watches += reflector.watches
            counts.expired += reflector.expired
            counts.failing += reflector.error is not None
        counts.requests += counts.lists + counts.watches + self.orphans.requests
        counts.errors += self.orphans.errors
        return counts

    def stats_by_cluster(self) -> dict[str, int]:
        """The Kubernetes API requests made (lists + watches + deletes + discovery), per
        cluster: this tracker's and each peer's."""
        return {self.cluster: self.stats.requests,
                **{name: peer.stats.requests for name, peer in self.peers.items()}}

    # -- the worker ---------------------------------------------------------------------------

    def step(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for work, then do all there is (one drain)."""
        with self._work:
            if not self._pending():
                self._work.wait(timeout)
            busy = self._pending()
        if busy:  # within a stream of changes, what comes in the gap is drained with it
            if (rest := self._drained_at + self.drain_gap - time.monotonic()) > 0:
                time.sleep(min(rest, timeout))
            self._drained_at = time.monotonic()
        if time.monotonic() - self._resynced_at >= self.resync_seconds:
            self.resync()
        if self._groups_seen:
            self._watch_groups()
        self.drain()
        if self.home and time.monotonic() - self._peers_followed >= PEERS_EVERY_SECONDS:
            self.peers_follow()
        for peer in self.peers.values():
            peer.step(0.0)

    def run_for(self, seconds: float) -> TrackerStats:
        """One bounded term: start (resuming where the cursors allow), work for `seconds`, stop
        (write what came, store the cursors); its stats. Tests and benchmarks use it; `track`
        runs the same steps for as long as it holds the lease."""
        self.start()
        try:
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                self.step(min(left, 0.2))
        finally:
            self.stop()
        return self.stats

    def resync(self) -> None:
        """Every workload in the stores is derived again, every object looked at for orphans,
        and the live workloads whose object is not in the store failed: what a change lost on
        its way (a workload marked pending after its objects were deleted) is caught here."""
        self._resynced_at = time.monotonic()
        now = time.time() - SWEEP_LAG_SECONDS
        if self._groups_served is None:
            self._watch_groups()
        with self._work:
            self._dirty.update(self.index.workloads())
            self._all_orphans = True
            for kind in PRIMARY:
                reflector = self.reflectors.get(kind)
                if reflector is not None and reflector.synced and reflector.error is None:
                    self._listed.setdefault(kind, now)

    def _pending(self) -> bool:
        return bool(self._dirty or self._new_events or self._listed or self._all_orphans
                    or self._claims_dirty)

    def drain(self) -> None:
        """Write everything the reflectors delivered: events, one reconcile per dirty workload,
        orphans, vanished workloads after a list; then store the cursors. What the database
        refused (through every retry) stays to do, and the cursors stay where they were."""
        # first the versions, then the work: every change up to these versions is in the work
        versions = {kind: r.resource_version for kind, r in self.reflectors.items()
                    if r.synced and r.resource_version is not None}
        with self._work:
            dirty, self._dirty = self._dirty, set()
            tombstones, self._tombstones = self._tombstones, {}
            events, self._new_events = self._new_events, {}
            listed, self._listed = self._listed, {}
            all_orphans, self._all_orphans = self._all_orphans, False
            claims, self._claims_dirty = self._claims_dirty, set()
            observed = {key: (self._claims.get(key), self._claim_warnings.get(key, ""))
                        for key in claims}
        try:
            if observed:
                self._counts.volumes += _write(self._observe_claims, observed)
            if events:
                self._counts.events += _write(self.events.record, list(events.values()))
            if dirty:
                _write(self._reconcile_all, dirty, tombstones)
            if dirty or all_orphans:
                self._counts.orphans += _write(
                    self.orphans.collect, self._objects(None if all_orphans else dirty))
            for kind, started in listed.items():
                _write(self.sweep_vanished, kind, started)
        except DatabaseError:
            with self._work:  # nothing is lost: it is done at the next drain
                self._dirty |= dirty
                self._tombstones = {**tombstones, **self._tombstones}
                self._new_events = {**events, **self._new_events}
                self._listed = {**listed, **self._listed}
                self._all_orphans |= all_orphans
                self._claims_dirty |= claims
            self._counts.errors += 1
            raise
        moved = {self.resource(kind): version for kind, version in versions.items()
                 if self._stored.get(self.resource(kind)) != version}
        if moved:
            retry_on_contention(_store_cursors, moved, what="tracker cursors")
            self._stored.update(moved)

    @staticmethod
    def _observe_claims(observed: dict[tuple[str, str], tuple[Obj | None, str]]) -> int:
        """Each claim's phase and warning written to its volume; how many volumes changed."""
        return sum(volume_observe(namespace=namespace, claim_name=name, claim=claim,
                                  warning=warning)
                   for (namespace, name), (claim, warning) in observed.items())

    def resource(self, kind: str) -> str:
        """The kind's cursor (TrackerCursor.resource): the home cluster's by the kind's
        resource, another cluster's prefixed with its name."""
        return RESOURCES[kind] if self.home else f"{self.cluster}/{RESOURCES[kind]}"

    # -- one workload ------------------------------------------------------------------------

    def observed(self, wid: int, kind: str, namespace: str) -> Observed:
        """The workload's objects in its own namespace, from the stores (a look-alike elsewhere
        is an orphan), with the pods and events of the peers' stores (work dispatched to their
        clusters)."""
        objects: dict[str, list[Obj]] = {}
        for tracker in (self, *self.peers.values()):
            for k, keys in tracker.index.keys(wid).items():
                if (tracker is not self and k not in FORWARDED) or k not in tracker.reflectors:
                    continue
                found = (tracker.reflectors[k].get(key) for key in keys)
                objects.setdefault(k, []).extend(
                    o for o in found if o is not None and namespace_of(o) == namespace)

        def first(k: str) -> Obj | None:
            found = objects.get(k)
            return found[0] if found else None

        return Observed(kind=kind, pods=objects.get("Pod") or [], job=first("Job"),
                        deployment=first("Deployment"), service=first("Service"),
                        ingress=first("Ingress"), events=objects.get("Event") or [],
                        group=first("JobSet") or first("MPIJob"))

    def reconcile(self, workload_id: int, *, row: WorkloadRow | None = None,
                  tombstone: Obj | None = None) -> None:
        """Derive one workload's state from the stores and write what changed. `row` saves a
        query when the caller read it already; `tombstone` is its primary object when a
        reflector saw it deleted."""
        self._counts.reconciles += 1
        current = row or workload_rows([workload_id]).get(workload_id)
        for _ in range(MARK_ATTEMPTS):
            if current is None or tracking_cluster(current) != self.cluster:
                return  # another cluster's tracker judges it
            kind = primary_kind(current)
            if kind in GROUP_WATCHED and not self._synced(kind):
                return  # its group is not watched (yet): nothing to judge it by
            observed = self.observed(workload_id, current["kind"], current["tenant__namespace"])
            primary = _primary(observed, kind)
            if current["engine"] and current["state"] not in Workload.FINAL_STATES:
                self._counts.ranks += mark_ranks(current, group_ranks(observed))
            outcome: Outcome | None
            if (tombstone is not None and primary is None
                    and current["state"] in Workload.LIVE_STATES):
                outcome = vanished_outcome(current, observed, tombstone)
                self._counts.vanished += outcome.reason == VANISHED
            else:
                outcome = workload_outcome(current["state"], observed)
            if outcome is None:
                return
            written = mark(current, outcome)
            if written is not False:
                self._counts.changes += bool(written)
                return
            # another writer moved it: read it again
            current = workload_rows([workload_id]).get(workload_id)

    def _reconcile_all(self, wids: Iterable[int], tombstones: dict[int, Obj]) -> None:
        for wid, row in workload_rows(wids).items():
            self.reconcile(wid, row=row, tombstone=tombstones.get(wid))

    def _synced(self, kind: str) -> bool:
        reflector = self.reflectors.get(kind)
        return reflector is not None and reflector.synced

    def sweep_vanished(self, kind: str, started: float) -> None:
        """After a list of `kind` (Job, Deployment, JobSet or MPIJob) that began at `started`
        (wall clock): the live workloads whose object is of that kind and is not in the store
        failed."""
        if kind not in PRIMARY:
            return  # a list of pods, events, Services or Ingresses says nothing of that
        listed_at = dt.datetime.fromtimestamp(started - self.clock_skew, tz=dt.UTC)

        def has_primary(wid: int, workload_kind: str, namespace: str) -> bool:
            return _primary(self.observed(wid, workload_kind, namespace), kind) is not None

        for row in vanished_since(kind, listed_at, has_primary, cluster=self.cluster):
            self._counts.vanished += 1
            if mark(row, Outcome(Workload.State.FAILED, VANISHED)):
                self._counts.changes += 1

    def _objects(self, wids: Iterable[int] | None) -> list[tuple[str, Obj]]:
        """(kind, object) of the given workloads (None: of every workload) from the stores."""
        result: list[tuple[str, Obj]] = []
        for wid in self.index.workloads() if wids is None else wids:
            for kind, keys in self.index.keys(wid).items():
                if kind == "Event" or kind not in self.reflectors:
                    continue
                result.extend((kind, obj) for key in keys
                              if (obj := self.reflectors[kind].get(key)) is not None)
        return result


def _primary(observed: Observed, kind: str) -> Obj | None:
    """The observed object of `kind` that is the workload."""
    if kind in GROUP_WATCHED:
        return observed.group if (observed.group or {}).get("kind") == kind else None
    return observed.job if kind == "Job" else observed.deployment


def _group_pod(pod: Obj) -> bool:
    """A pod of a JobSet or an MPIJob (their controllers' labels)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return JOBSET_RESTART_LABEL in labels or MPI_ROLE_LABEL in labels


def _distributed_launched() -> bool:
    """Whether the portal has launched a distributed workload (one query)."""
    return Workload.objects.filter(launch_spec__engine__in=list(GROUP_KINDS)).exists()


def _write(step: Callable[..., Any], *args: Any) -> Any:
    """A step that writes to the database, run again when another writer's lock ends it (each
    step is idempotent: it re-reads what it writes). Lock contention must not cost a change."""
    return retry_on_contention(step, *args, what=f"tracker {step.__name__}")


# -- leading: the lease and the loop ------------------------------------------------------------

LEASE_SECONDS = 15.0  # a leader that stops renewing is replaced this long after its last renewal


class Lease:
    """The tracker's lease: a Redis lock with an expiry that its holder renews. Whoever holds it
    leads; when the holder stops renewing (crashed, cut off), it lapses and a standby takes it."""

    def __init__(self, *, seconds: float = LEASE_SECONDS) -> None:
        self.seconds = seconds
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1,
                                      socket_connect_timeout=1)
        self._lock = client.lock(cache.make_and_validate_key(LOCK_KEY), timeout=seconds)

    def acquire(self) -> bool:
        """Take the lease if it is free; False when another holds it or Redis is away."""
        try:
            return bool(self._lock.acquire(blocking=False))
        except redis.RedisError as exc:
            log.warning("tracker lease unavailable (Redis): %s", exc)
            return False

    def renew(self) -> bool:
        """Extend the lease to its full length; False when it is no longer ours (it lapsed and
        another took it) or Redis is away."""
        try:
            self._lock.reacquire()
            return True
        except (redis.RedisError, redis.exceptions.LockError) as exc:
            log.warning("tracker lease lost: %s", exc)
            return False

    def release(self) -> None:
        try:
            self._lock.release()
        except (redis.RedisError, redis.exceptions.LockError):
            pass  # it lapses by itself

    @staticmethod
    def holder() -> str | None:
        """Who holds the lease now (its token), None when no one does."""
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1,
                                      socket_connect_timeout=1)
        value = client.get(cache.make_and_validate_key(LOCK_KEY))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)


def _store_cursors(moved: dict[str, str]) -> None:
    """resource → resourceVersion, in one transaction (one turn of the database's write lock
    for all of them: on SQLite, every writer of the portal waits for it)."""
    with transaction.atomic():
        for resource, version in moved.items():
            TrackerCursor.objects.update_or_create(resource=resource,
                                                   defaults={"resource_version": version})


def tracker_from_settings() -> Tracker:
    return Tracker(
        resync_seconds=float(getattr(settings, "PORTAL_TRACKER_RESYNC_SECONDS", 300)),
        failed_service_grace_seconds=float(
            getattr(settings, "PORTAL_TRACKER_FAILED_SERVICE_GRACE_SECONDS", 600)))


def track(*, stop: threading.Event | None = None, duration: float | None = None,
          lease_seconds: float = LEASE_SECONDS, tracker: Tracker | None = None,
          say: Callable[[str], None] = log.info) -> None:
    """Lead the tracking while holding the lease, stand by while another process holds it,
    until `stop` is set or `duration` seconds have passed (forever by default). Never raises
    for the cluster, the cache or the database being away: the reflectors retry, a lost lease
    is stood down from, a refused drain is done again."""
    stop = stop or threading.Event()
    deadline = None if duration is None else time.monotonic() + duration
    renew_every = lease_seconds / 3

    def done() -> bool:
        return stop.is_set() or (deadline is not None and time.monotonic() >= deadline)

    tracker = tracker or tracker_from_settings()
    lease = Lease(seconds=lease_seconds)
    standing_by = False
    while not done():
        if not connection.in_atomic_block:
            close_old_connections()  # long-lived: drop a connection the database closed
        if not lease.acquire():
            if not standing_by:
                say("another tracker leads; standing by")
                standing_by = True
            stop.wait(min(renew_every, 1.0))
            continue
        standing_by = False
        say("tracker leading")
        try:
            _lead(tracker, lease, done, renew_every, say)
        finally:
            try:
                tracker.stop()
            finally:
                lease.release()
        say(f"tracker stood down: {tracker.stats.as_dict()}")


def _lead(tracker: Tracker, lease: Lease, done: Callable[[], bool], renew_every: float,
          say: Callable[[str], None]) -> None:
    tracker.start(wait=0.0)  # not waited for: the lease is renewed meanwhile
    renewed = logged = time.monotonic()
    synced = False
    while not done():
        try:
            # with peers the home tracker waits less, so that their work waits little too
            tracker.step(min(renew_every, 0.2 if tracker.peers else 0.5))
        except DatabaseError as exc:
            # the database is down, or stayed locked through every retry: the work stays
            # to do, the cursors where they were
            log.warning("tracker: the database is unavailable: %s", exc)
            time.sleep(1.0)
            close_old_connections()
        now = time.monotonic()
        if now - renewed >= renew_every:
            if not lease.renew():
                return
            renewed = now
        if not synced and all(r.synced for r in tracker.reflectors.values()):
            synced = True
            say(f"tracker synced: {tracker.stats.as_dict()}")
        if now - logged >= STATS_EVERY_SECONDS:
            say(f"tracking: {tracker.stats.as_dict()}")
            for name, peer in tracker.peers.items():
                say(f"tracking {name}: {peer.stats.as_dict()}")
            logged = now
