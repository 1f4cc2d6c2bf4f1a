"""State derivation: a workload's objects as the tracker sees them → its state, written
through workload_transition; vanished objects after a list. Plain functions: the tracker
(tracker.py) holds the stores and calls them."""


from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import Q
from django.db.models.fields.json import KT
from django.utils import timezone

from clusters.models import home_cluster_name
from core.tasks import send_on_commit
from workloads.notices import workload_reclaimed

from ..lifecycle import LATE_FACTS, Observed, Outcome, derive, expires_at_for
from ..manifests import BATCH, SERVICE
from ..models import Workload, objects_cluster
from ..transitions import workload_transition
from .index import CHUNK, GROUP_KINDS, GROUP_WATCHED, VANISHED, Obj, State

log = logging.getLogger(__name__)


class WorkloadRow(TypedDict):
    """The columns of a workload that the tracker derives from (`workload_rows`)."""

    id: int
    state: str
    kind: str
    reason: str
    node: str
    address: str
    exit_code: int | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    updated_at: dt.datetime
    deleted_at: dt.datetime | None
    max_runtime_minutes: int | None
    tenant__namespace: str
    ranks: list[dict[str, Any]]  # as the tracker last wrote them (mark_ranks)
    engine: str  # the launch spec's ("" for one pod)
    cluster: str  # the cluster holding its objects (by name)


def workload_rows(wids: Iterable[int]) -> dict[int, WorkloadRow]:
    """The rows the tracker derives from, by id (ids that are not in the database are left
    out)."""
    ids = sorted(wids)
    rows: dict[int, WorkloadRow] = {}
    for start in range(0, len(ids), CHUNK):
        for row in Workload.objects.filter(pk__in=ids[start:start + CHUNK]).values(
                "id", "state", "kind", "reason", "node", "address", "exit_code",
                "started_at", "finished_at", "updated_at", "deleted_at",
                "max_runtime_minutes", "tenant__namespace", "ranks", "cluster",
                engine=KT("launch_spec__engine")):
            row["engine"] = row["engine"] or ""
            rows[row["id"]] = row
    return rows


def mark_ranks(row: WorkloadRow, ranks: list[dict[str, Any]]) -> bool:
    """Write a distributed workload's ranks as the tracker sees them now, when they changed.
    Not its state (transitions.py writes that): a plain update of the one column."""
    if ranks == row.get("ranks"):
        return False
    Workload.objects.filter(pk=row["id"]).update(ranks=ranks)
    row["ranks"] = ranks
    return True


def vanished_outcome(row: WorkloadRow, observed: Observed, last: Obj) -> Outcome:
    """The primary object was deleted while the workload was live: its last state may hold a
    verdict (a Job deleted right after it finished); otherwise it vanished."""
    kind = last.get("kind") or primary_kind(row)
    if kind in GROUP_WATCHED:
        with_last = dataclasses.replace(observed, group=last)
    elif kind == "Job":
        with_last = dataclasses.replace(observed, job=last)
    else:
        with_last = dataclasses.replace(observed, deployment=last)
    verdict = derive(with_last, row["state"])
    if verdict is not None and verdict.state in Workload.FINAL_STATES:
        return verdict
    return Outcome(State.FAILED, VANISHED)


def primary_kind(row: WorkloadRow) -> str:
    """The kind of the object that is the workload: its group's (a distributed workload), a
    Job (batch) or a Deployment (service)."""
    if row.get("engine"):
        return GROUP_KINDS[row["engine"]]
    return "Job" if row["kind"] == BATCH else "Deployment"


def tracking_cluster(row: WorkloadRow) -> str:
    """The cluster whose tracker judges a workload's state: the one holding its objects, as
    workloads.objects.workload_kube reaches them (objects_cluster: a service's own cluster,
    the home cluster for batch and distributed work, dispatched from there)."""
    return objects_cluster(row["kind"], row["cluster"])


def live_of_kind(kind: str, listed_at: dt.datetime, cluster: str | None = None) -> Any:
    """(id, namespace) of the live workloads, last written before `listed_at`, whose object is
    of `kind` (Job, Deployment, JobSet or MPIJob). The key's JSON lookups, not KT(): on SQLite
    (the demo's database) KT() compared with a string wraps the string in JSON_EXTRACT(…, '$'),
    which fails as malformed JSON (the demo's tracker failed every sweep so)."""
    workload_kind = SERVICE if kind == "Deployment" else BATCH
    live = Workload.objects.filter(state__in=Workload.LIVE_STATES, kind=workload_kind,
                                   updated_at__lt=listed_at)
    # those this cluster's tracker judges (tracking_cluster): the services placed on it; on
    # the home cluster, every batch workload (a worker's copy of a dispatched one is not ours)
    cluster = cluster or home_cluster_name()
    if workload_kind == SERVICE:
        live = live.filter(cluster=cluster)
    elif cluster != home_cluster_name():
        live = live.none()
    engines = {group: engine for engine, group in GROUP_KINDS.items()}
    if kind in engines:
        live = live.filter(launch_spec__engine=engines[kind])
    else:  # a distributed workload has no Job of ours: its group is judged by its own list
        live = live.filter(Q(launch_spec__engine__isnull=True)
                           | ~Q(launch_spec__engine__in=list(GROUP_KINDS)))
    return live.values_list("id", "tenant__namespace")


def vanished_since(kind: str, listed_at: dt.datetime,
                   has_primary: Callable[[int, str, str], bool], *,
                   cluster: str | None = None) -> list[WorkloadRow]:
    """After a list of `kind` (Job, Deployment, JobSet or MPIJob): the live workloads whose
    object is of that kind, without it. Only the kind just listed is judged: a 410 relists one kind at a time, and the other
    kind's store may predate workloads launched since (the real-cluster 410 test met a batch
    workload failed by a Deployment relist). Only those that were already live before the list
    began count — the create task marks a workload pending after creating its objects, so
    those objects were in the list; `listed_at` leaves room for the clocks of different hosts.
    `has_primary(workload id, workload kind, namespace)` answers from the store."""
    if kind not in ("Job", "Deployment", *GROUP_WATCHED):
        raise ValueError(f"a list of {kind} says nothing of vanished workloads")
    workload_kind = SERVICE if kind == "Deployment" else BATCH
    gone = [wid for wid, namespace in live_of_kind(kind, listed_at, cluster)
            if not has_primary(wid, workload_kind, namespace)]
    return [row for row in workload_rows(gone).values()
            if row["state"] in Workload.LIVE_STATES]


def mark(row: WorkloadRow, outcome: Outcome) -> bool | None:
    """Write an outcome unless it says nothing new; re-checked under a row lock so that a stop
    (or another writer) in between wins. True when it wrote, None when there was nothing to
    write, False when the row had moved since it was read: the caller derives again from what
    it is now (no later event may come for it: the create task's `pending` can land after the
    pod it created is already running)."""
    if row["state"] in Workload.FINAL_STATES:
        return _mark_later_facts(row, outcome)
    reason = row["reason"] if outcome.reason is None else outcome.reason
    facts = {k: v for k, v in outcome.fields.items() if k in ("node", "address", "exit_code")}
    if (outcome.state == row["state"] and reason == row["reason"]
            and all(row.get(k) == v for k, v in facts.items())):
        return None
    with transaction.atomic():
        locked = (Workload.objects.select_for_update()
                  .filter(pk=row["id"], state=row["state"]).first())
        if locked is None:
            return False  # moved meanwhile: derive again from the new state
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
            return None  # an edge the table refuses (logged there)
        if outcome.state in Workload.FINAL_STATES and locked.kind == BATCH and locked.ssh:
            # its Service held an address for SSH while it ran: give it back now
            send_on_commit("workloads.tasks.workload_address_release_task", locked.pk)
        if outcome.state == State.QUEUED and row["state"] in (State.RUNNING, State.PENDING) \
                and locked.started_at is not None:
            # Kueue took its GPUs back for the tenant that lent them: tell its owner (seen
            # straight from running, or through pending while its pod was being stopped)
            workload_reclaimed(workload=locked, reason=reason)
    return True


def _mark_later_facts(row: WorkloadRow, outcome: Outcome) -> bool | None:
    """A finished workload takes the facts of its pod's end that arrived after its verdict (the
    Job's Complete condition was seen before the pod's exit code): only those it lacks, never a
    state, a reason or a fact it has. Through workload_transition, as the same state (no
    event)."""
    facts = {k: v for k, v in outcome.fields.items()
             if k in LATE_FACTS and row.get(k) is None}
    if outcome.state != row["state"] or not facts:
        return None
    if not workload_transition(workload_id=row["id"], allowed_from=(row["state"],),
                               to=row["state"], **facts):
        return False  # gone meanwhile
    return True


def _transition_text(outcome: Outcome, reason: str) -> str:
    node = outcome.fields.get("node")
    if outcome.state == State.RUNNING:
        return f"Running on {node}." if node else "Running."
    return reason or outcome.state.capitalize()
