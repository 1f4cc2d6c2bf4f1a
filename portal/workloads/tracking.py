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
import datetime as dt
import logging
import queue
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.utils import timezone

from portal.contention import retry_on_contention
from portal.kube.client import Expired, Kube, KubeError, KubeRefused
from portal.kube.labels import LABEL_WORKLOAD_ID, MANAGED_BY_SELECTOR, PREFIX
from portal.workloads.notices import workload_reclaimed
from tenants.models import Tenant

from .lifecycle import Observed, Outcome, derive, parse_time, workload_outcome
from .manifests import BATCH, SERVICE
from .models import TrackerCursor, Workload, WorkloadEvent
from .services import expires_at_for
from .transitions import workload_transition

log = logging.getLogger(__name__)

State = Workload.State
Obj = dict[str, Any]

# kind → the TrackerCursor resource name; the order is the order of a relist
WATCHED = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments", "Service": "services",
           "Event": "events"}
PRIMARY = {"Job", "Deployment"}  # the object that is the workload (batch / service)
LIVE = (State.QUEUED, State.PENDING, State.RUNNING)  # states whose objects must exist
SELECTOR = MANAGED_BY_SELECTOR
OBJECT_NAME = re.compile(rf"^{PREFIX}-(\d+)(?:-|$)")
KUEUE_WORKLOAD_PREFIX = re.compile(r"^(?:job|pod|deployment)-")

VANISHED = "Its Kubernetes objects were deleted outside the portal."
EVENTS_PER_WORKLOAD = 30  # kept in memory for derivation (FailedCreate); all are stored in the DB
CHUNK = 500  # ids per database query
WATCH_RESTARTS = 3  # a stream the server ends early is re-opened at most this often per cycle
LOCK_KEY = "workloads-tracker-lock"


def workload_id_of(obj: Obj) -> int | None:
    """The workload an object belongs to: its label, or for an event the involved object's
    name (`wl-<id>-…`)."""
    if "involvedObject" in obj:
        involved = obj.get("involvedObject") or {}
        name = involved.get("name") or ""
        if involved.get("kind") == "Workload":
            # Kueue's Workload of a Job or pod: "job-<job name>-<hash>", "pod-<pod name>-<hash>"
            name = KUEUE_WORKLOAD_PREFIX.sub("", name)
        match = OBJECT_NAME.match(name)
        return int(match.group(1)) if match else None
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_WORKLOAD_ID, "")
    return int(value) if value.isdigit() else None


def _namespace(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _uid(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


class Index:
    """The current objects of the watched kinds, by workload id (ours only)."""

    def __init__(self) -> None:
        # kind → uid → (workload id or None, object)
        self.objects: dict[str, dict[str, tuple[int | None, Obj]]] = {k: {} for k in WATCHED}
        # workload id → kind → uid → object
        self.by_workload: dict[int, dict[str, dict[str, Obj]]] = defaultdict(
            lambda: defaultdict(dict))

    def put(self, kind: str, obj: Obj) -> int | None:
        uid = _uid(obj)
        self.remove(kind, obj)
        wid = workload_id_of(obj)
        if kind == "Event" and wid is None:
            return None  # not about a workload: not kept
        self.objects[kind][uid] = (wid, obj)
        if wid is not None:
            bucket = self.by_workload[wid][kind]
            bucket[uid] = obj
            if kind == "Event" and len(bucket) > EVENTS_PER_WORKLOAD:
                oldest = min(bucket, key=lambda u: bucket[u].get("lastTimestamp") or "")
                self.objects["Event"].pop(oldest, None)
                del bucket[oldest]
        return wid

    def remove(self, kind: str, obj: Obj) -> int | None:
        entry = self.objects[kind].pop(_uid(obj), None)
        if entry is None:
            return workload_id_of(obj)
        wid = entry[0]
        if wid is not None and wid in self.by_workload:
            self.by_workload[wid][kind].pop(_uid(obj), None)
            if not any(self.by_workload[wid].values()):
                del self.by_workload[wid]
        return wid

    def replace(self, kind: str, items: Iterable[Obj]) -> set[int]:
        """A relist: the kind's objects become `items`; returns every workload id touched."""
        touched = {wid for wid, _ in self.objects[kind].values() if wid is not None}
        for _, obj in list(self.objects[kind].values()):
            self.remove(kind, obj)
        for obj in items:
            wid = self.put(kind, obj)
            if wid is not None:
                touched.add(wid)
        return touched

    def observed(self, wid: int, kind: str, namespace: str) -> Observed:
        """The workload's objects in its own namespace (a look-alike elsewhere is an orphan)."""
        objects = self.by_workload.get(wid) or {}

        def of(k: str) -> list[Obj]:
            return [o for o in (objects.get(k) or {}).values() if _namespace(o) == namespace]

        jobs, deployments, services = of("Job"), of("Deployment"), of("Service")
        return Observed(kind=kind, pods=of("Pod"), job=jobs[0] if jobs else None,
                        deployment=deployments[0] if deployments else None,
                        service=services[0] if services else None, events=of("Event"))

    def top_level(self, wids: Iterable[int] | None = None) -> list[tuple[str, Obj]]:
        """Objects of ours that no other object owns (what deleting cleans up the rest)."""
        result = []
        ids = self.by_workload.keys() if wids is None else wids
        for wid in ids:
            for kind, objects in (self.by_workload.get(wid) or {}).items():
                if kind == "Event":
                    continue
                for obj in objects.values():
                    meta = obj.get("metadata") or {}
                    if not meta.get("ownerReferences") and not meta.get("deletionTimestamp"):
                        result.append((kind, obj))
        return result


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


class Tracker:
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
        for wid, row in self._rows(wids).items():
            observed = self.index.observed(wid, row["kind"], row["tenant__namespace"])
            primary = observed.job if row["kind"] == BATCH else observed.deployment
            outcome: Outcome | None
            if wid in tombstones and primary is None and row["state"] in LIVE:
                outcome = self._vanished_outcome(row, observed, tombstones[wid])
            else:
                outcome = workload_outcome(row["state"], observed)
            if outcome is not None:
                self._mark(row, outcome)

    def _vanished_outcome(self, row: dict[str, Any], observed: Observed, last: Obj) -> Outcome:
        """The primary object was deleted while the workload was live: its last state may hold
        a verdict (a Job deleted right after it finished); otherwise it vanished."""
        kind = last.get("kind") or ("Job" if row["kind"] == BATCH else "Deployment")
        with_last = dataclasses.replace(observed, **{"job" if kind == "Job" else "deployment":
                                                     last})
        verdict = derive(with_last, row["state"])
        if verdict is not None and verdict.state in Workload.FINAL_STATES:
            return verdict
        self.stats.vanished += 1
        return Outcome(State.FAILED, VANISHED)

    def _sweep_vanished(self, kind: str, listed_at: dt.datetime) -> None:
        """After a relist of `kind` (Job or Deployment): live workloads of that kind without
        their object failed. Only the kind just listed is judged: a 410 relists one kind at a
        time, and the other kind's view may predate workloads launched since. Only those that
        were already pending before the list began count — the create task marks a workload
        pending after creating its objects, so those objects were in the list — with room
        for clocks of different hosts."""
        cutoff = listed_at - dt.timedelta(seconds=self.clock_skew)
        workload_kind = BATCH if kind == "Job" else SERVICE
        live = Workload.objects.filter(state__in=LIVE,
                                       kind=workload_kind, updated_at__lt=cutoff)
        gone = []
        for wid, namespace in live.values_list("id", "tenant__namespace"):
            observed = self.index.observed(wid, workload_kind, namespace)
            if (observed.job if kind == "Job" else observed.deployment) is None:
                gone.append(wid)
        for row in self._rows(gone).values():
            if row["state"] in LIVE:
                self.stats.vanished += 1
                self._mark(row, Outcome(State.FAILED, VANISHED))

    def _mark(self, row: dict[str, Any], outcome: Outcome) -> None:
        """Write an outcome unless it says nothing new; re-checked under a row lock so that a
        stop (or another writer) in between wins."""
        reason = row["reason"] if outcome.reason is None else outcome.reason
        facts = {k: v for k, v in outcome.fields.items() if k in ("node", "address", "exit_code")}
        if (outcome.state == row["state"] and reason == row["reason"]
                and all(row[k] == v for k, v in facts.items())):
            return
        with transaction.atomic():
            locked = (Workload.objects.select_for_update()
                      .filter(pk=row["id"], state=row["state"]).first())
            if locked is None:
                return  # moved meanwhile; the next change re-derives from the new state
            fields: dict[str, Any] = dict(facts)
            if outcome.state == State.RUNNING or outcome.state in Workload.FINAL_STATES:
                started = locked.started_at or outcome.fields.get("started_at")
                if outcome.state == State.RUNNING:
                    started = started or timezone.now()
                    if locked.started_at is None:
                        # the maximum runtime counts from when it started running
                        fields["expires_at"] = expires_at_for(locked, started)
                if started is not None:
                    fields["started_at"] = started
            if outcome.state in Workload.FINAL_STATES and outcome.fields.get("finished_at"):
                fields["finished_at"] = outcome.fields["finished_at"]
            moved = workload_transition(
                workload_id=locked.pk, allowed_from=(row["state"],), to=outcome.state,
                reason=reason,
                event={"reason": outcome.state.capitalize(),
                       "message": _transition_text(outcome, reason),
                       "type": "Warning" if outcome.state == State.FAILED else "Normal",
                       "source": "tracker"},
                **fields)
            if not moved:
                return  # an edge the table refuses (logged there)
            if row["state"] == State.RUNNING and outcome.state == State.QUEUED:
                # Kueue took its GPUs back for the tenant that lent them: tell its owner
                workload_reclaimed(workload=locked, reason=reason)
        self.stats.changes += 1

    # -- events ----------------------------------------------------------------------------

    def _record_events(self, events: list[Obj]) -> None:
        """Kubernetes events of our workloads become WorkloadEvent rows, one per event uid,
        its count and time kept current."""
        fresh = [e for e in events
                 if self._recorded.get(_uid(e)) != int(e.get("count") or 1)]
        by_workload: dict[int, list[Obj]] = defaultdict(list)
        for event in fresh:
            wid = workload_id_of(event)
            if wid is not None:
                by_workload[wid].append(event)
        if not by_workload:
            return
        namespaces = {wid: row["tenant__namespace"] for wid, row in self._rows(by_workload).items()}
        ours = [(wid, e) for wid, evs in by_workload.items() for e in evs
                if namespaces.get(wid) and _namespace(e) == namespaces[wid]]
        for start in range(0, len(ours), CHUNK):
            chunk = ours[start:start + CHUNK]
            known = dict(WorkloadEvent.objects.filter(uid__in=[_uid(e) for _, e in chunk])
                         .values_list("uid", "count"))
            new = []
            for wid, event in chunk:
                uid, count = _uid(event), int(event.get("count") or 1)
                at = parse_time(event.get("lastTimestamp") or event.get("eventTime")
                                or event.get("firstTimestamp")) or timezone.now()
                if uid not in known:
                    source = ((event.get("source") or {}).get("component")
                              or event.get("reportingComponent") or "kubernetes")
                    new.append(WorkloadEvent(
                        workload_id=wid, uid=uid, at=at, count=count,
                        type=(event.get("type") or "Normal")[:16],
                        reason=(event.get("reason") or "")[:128],
                        message=event.get("message") or "", source=source[:64]))
                elif known[uid] != count:
                    WorkloadEvent.objects.filter(uid=uid).update(
                        count=count, at=at, message=event.get("message") or "")
                    self.stats.events += 1
                self._recorded[uid] = count
            if new:
                # a concurrent writer of the same uid (another tracker) is not an error
                WorkloadEvent.objects.bulk_create(new, ignore_conflicts=True)
                self.stats.events += len(new)

    # -- orphans ---------------------------------------------------------------------------

    def _delete_orphans(self, wids: Iterable[int] | None) -> None:
        """Delete our objects that no live workload owns: an id the database does not know, a
        workload stopped or deleted, a service failed for longer than the grace (its Deployment
        would hold GPUs the portal no longer counts), or a copy in another namespace than its
        workload's. Only in
        namespaces of this portal's tenants, so a second portal (or a test) sharing the cluster
        is left alone. Jobs of finished batch workloads stay: ttlSecondsAfterFinished removes
        them, and their logs stay readable until then."""
        candidates = [(kind, obj) for kind, obj in self.index.top_level(wids)
                      if _uid(obj) not in self._deleted]
        if not candidates:
            return
        tenant_namespaces = set(Tenant.objects.filter(
            namespace__in={_namespace(obj) for _, obj in candidates})
            .values_list("namespace", flat=True))
        candidates = [(k, o) for k, o in candidates if _namespace(o) in tenant_namespaces]
        rows = self._rows({wid for _, o in candidates if (wid := workload_id_of(o)) is not None})
        failed_before = timezone.now() - dt.timedelta(seconds=self.failed_service_grace)
        for kind, obj in candidates:
            row = rows.get(workload_id_of(obj))  # type: ignore[arg-type]
            why = _orphan_reason(row, _namespace(obj), failed_before)
            if why is None:
                continue
            meta = obj["metadata"]
            self._deleted.add(_uid(obj))  # once: its DELETED event follows, or a relist retries
            try:
                found = self.kube.delete(kind, meta["name"], meta["namespace"])
                self.stats.requests += 1
                if kind in PRIMARY:  # its Secret (a Jupyter token) has the same name
                    self.kube.delete("Secret", meta["name"], meta["namespace"])
                    self.stats.requests += 1
            except KubeRefused as exc:  # e.g. RBAC: say so, and carry on with the others
                log.error("could not delete orphan %s %s/%s: %s", kind, meta["namespace"],
                          meta["name"], exc)
                self.stats.errors += 1
                continue
            if not found:
                # already gone: usually a stop task removed it and its DELETED event is still on
                # its way on another watch stream (the load test saw this after every stop)
                log.debug("orphan %s %s/%s was already gone", kind, meta["namespace"],
                          meta["name"])
                continue
            log.warning("deleted orphan %s %s/%s: %s", kind, meta["namespace"], meta["name"], why)
            self.stats.orphans += 1


def _orphan_reason(row: dict[str, Any] | None, namespace: str,
                   failed_before: dt.datetime) -> str | None:
    if row is None:
        return "no workload with this id"
    if row["tenant__namespace"] != namespace:
        return f"its workload lives in {row['tenant__namespace']}"
    if row["state"] == State.STOPPED:
        return "its workload is stopped"
    if row["deleted_at"] is not None and row["state"] in Workload.FINAL_STATES:
        return "its workload was deleted"
    # a failed service's pod would keep holding GPUs the portal no longer counts; it stays a
    # while first, so that the researcher can read why it crashed
    if (row["state"] == State.FAILED and row["kind"] != BATCH
            and (row["finished_at"] is None or row["finished_at"] < failed_before)):
        return "its workload failed"
    return None


def _transition_text(outcome: Outcome, reason: str) -> str:
    node = outcome.fields.get("node")
    if outcome.state == State.RUNNING:
        return f"Running on {node}." if node else "Running."
    return reason or outcome.state.capitalize()


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
