"""The workload state machine (transitions.py): its table of edges, what a transition writes,
conditional claims racing on the real PostgreSQL, and a check that no code writes a
workload's state any other way."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from pathlib import Path

import pytest
from django.db import connection, connections
from django.db.models import F
from django.utils import timezone

from catalogue.models import Template
from identity.models import User
from tenants.services import tenant_ensure
from tests.state_machines import app_imports, modules_above, project_modules
from tests.state_machines import state_writes as writes_of_any_state
from tests.support.waiting import eventually
from workloads.models import Workload, WorkloadEvent
from workloads.transitions import (
    STOPPABLE,
    TRANSITIONS,
    may_move,
    workload_transition,
)

S = Workload.State
REPO = Path(__file__).resolve().parents[2]


def row(gpu_types, state: str = S.SUBMITTED, **fields) -> Workload:
    """A workload row in `state`, as the portal's writers would have left it."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Vision Lab {uuid.uuid4().hex[:6]}")
    owner = User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")
    return Workload.objects.create(
        tenant=tenant, owner=owner, name="w", object_name="wl-w",
        template=Template.objects.get(slug="custom"), kind="batch", gpu_type=gpu_types["a100"],
        gpu_count=1, image="busybox:1.36", cpu=1, memory_gb=1, state=state, **fields)


# -- the table -------------------------------------------------------------------------------

# the moves the portal makes, written out by hand (not derived from TRANSITIONS)
NEEDED = [
    (S.SUBMITTED, S.CREATING),  # the create task's claim
    (S.CREATING, S.CREATING),  # its retry (launch_attempts + 1)
    (S.CREATING, S.QUEUED), (S.CREATING, S.PENDING), (S.CREATING, S.FAILED),
    (S.CREATING, S.RUNNING),  # the tracker saw it start before the task wrote "pending"
    (S.QUEUED, S.PENDING), (S.QUEUED, S.RUNNING),
    (S.PENDING, S.RUNNING), (S.PENDING, S.FAILED), (S.PENDING, S.SUCCEEDED),
    (S.RUNNING, S.QUEUED),  # Kueue preempted it
    (S.RUNNING, S.PENDING),  # a Job retries a failed attempt
    (S.RUNNING, S.SUCCEEDED), (S.RUNNING, S.FAILED),
    (S.SUBMITTED, S.STOPPING), (S.CREATING, S.STOPPING), (S.QUEUED, S.STOPPING),
    (S.PENDING, S.STOPPING), (S.RUNNING, S.STOPPING),
    (S.STOPPING, S.STOPPED),
]
NEVER = [
    (S.SUCCEEDED, S.RUNNING), (S.FAILED, S.RUNNING), (S.STOPPED, S.RUNNING),
    (S.FAILED, S.STOPPING), (S.STOPPED, S.STOPPING), (S.SUCCEEDED, S.FAILED),
    (S.STOPPING, S.RUNNING), (S.STOPPING, S.FAILED), (S.STOPPING, S.QUEUED),
    (S.SUBMITTED, S.RUNNING), (S.SUBMITTED, S.STOPPED), (S.RUNNING, S.STOPPED),
    (S.QUEUED, S.SUBMITTED), (S.RUNNING, S.CREATING), (S.PENDING, S.CREATING),
]


@pytest.mark.parametrize(("current", "to"), NEEDED)
def test_the_moves_the_portal_makes_are_edges(current, to):
    assert may_move(current, to)


@pytest.mark.parametrize(("current", "to"), NEVER)
def test_moves_no_workload_makes_are_not(current, to):
    assert not may_move(current, to)


def test_every_state_is_in_the_table_and_finished_is_final():
    assert set(TRANSITIONS) == set(S.values)
    for final in Workload.FINAL_STATES:
        assert TRANSITIONS[final] == frozenset()
    assert set(STOPPABLE) == set(Workload.ACTIVE_STATES) - {S.STOPPING}


def test_every_move_the_tracker_can_derive_is_an_edge():
    """lifecycle.workload_outcome gives queued/pending/running/succeeded/failed from a live
    state, and stopped from stopping: none of them may be refused (a tracker cycle would
    keep a workload where it was)."""
    derived = (S.QUEUED, S.PENDING, S.RUNNING, S.SUCCEEDED, S.FAILED)
    for current in (S.CREATING, S.QUEUED, S.PENDING, S.RUNNING):
        for to in derived:
            assert may_move(current, to), (current, to)
    assert may_move(S.STOPPING, S.STOPPED)


# -- what a transition writes ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("current", list(S.values))
@pytest.mark.parametrize("to", list(S.values))
def test_a_transition_is_written_exactly_when_the_table_has_it(gpu_types, current, to, caplog):
    workload = row(gpu_types, current, reason="before")
    with caplog.at_level(logging.ERROR, logger="workloads.transitions"):
        moved = workload_transition(workload_id=workload.pk, allowed_from=(current,), to=to,
                                    reason="after")
    workload.refresh_from_db()
    legal = current == to or to in TRANSITIONS[current]
    assert moved is legal
    assert (workload.state, workload.reason) == ((to, "after") if legal else (current, "before"))
    assert ("is not a transition" in caplog.text) is not legal


@pytest.mark.django_db
def test_a_claim_from_another_state_writes_nothing(gpu_types):
    workload = row(gpu_types, S.STOPPING, reason="stopped by someone")
    assert not workload_transition(workload_id=workload.pk,
                                   allowed_from=(S.SUBMITTED, S.CREATING), to=S.CREATING,
                                   launch_attempts=F("launch_attempts") + 1)
    workload.refresh_from_db()
    assert (workload.state, workload.launch_attempts) == (S.STOPPING, 0)
    assert not workload_transition(workload_id=10**9, allowed_from=(S.SUBMITTED,),
                                   to=S.CREATING)  # no such workload


@pytest.mark.django_db
def test_with_debug_on_a_refused_edge_is_still_refused_not_raised(gpu_types, settings, caplog):
    """The demo runs with DEBUG: a raise would end the tracker's cycle for every workload."""
    settings.DEBUG = True
    workload = row(gpu_types, S.SUCCEEDED)
    with caplog.at_level(logging.ERROR, logger="workloads.transitions"):
        assert not workload_transition(workload=workload, allowed_from=(S.SUCCEEDED,),
                                       to=S.RUNNING)
    assert "succeeded → running is not a transition" in caplog.text
    workload.refresh_from_db()
    assert workload.state == S.SUCCEEDED
    with pytest.raises(ValueError, match="not workload states"):
        workload_transition(workload=workload, allowed_from=("sleeping",), to=S.RUNNING)


@pytest.mark.django_db
def test_timestamps_reason_and_fields(gpu_types):
    earlier = timezone.now() - dt.timedelta(hours=1)
    workload = row(gpu_types, S.PENDING, reason="waiting")
    Workload.objects.filter(pk=workload.pk).update(updated_at=earlier)

    assert workload_transition(workload=workload, allowed_from=(S.PENDING,), to=S.RUNNING,
                               node="gpu-node-1")
    assert workload.started_at is not None and workload.updated_at > earlier
    assert (workload.state, workload.node, workload.reason) == (S.RUNNING, "gpu-node-1",
                                                                "waiting")  # None: kept
    started = workload.started_at
    # preempted and admitted again: it started when it first ran
    assert workload_transition(workload=workload, allowed_from=(S.RUNNING,), to=S.QUEUED)
    assert workload_transition(workload=workload, allowed_from=(S.QUEUED,), to=S.RUNNING)
    assert workload.started_at == started and workload.finished_at is None
    # a finish time the cluster reported is kept; otherwise it is now
    finished = timezone.now() - dt.timedelta(minutes=5)
    assert workload_transition(workload=workload, allowed_from=(S.RUNNING,), to=S.SUCCEEDED,
                               finished_at=finished, exit_code=0)
    assert (workload.finished_at, workload.exit_code) == (finished, 0)
    # a final state written again (a fact that came after the verdict) keeps its finish time
    assert workload_transition(workload=workload, allowed_from=(S.SUCCEEDED,), to=S.SUCCEEDED,
                               exit_code=1)
    assert (workload.state, workload.finished_at, workload.exit_code) == (S.SUCCEEDED,
                                                                          finished, 1)
    other = row(gpu_types, S.STOPPING)
    assert workload_transition(workload=other, allowed_from=(S.STOPPING,), to=S.STOPPED)
    assert other.finished_at is not None and other.started_at is None


@pytest.mark.django_db
def test_the_event_is_recorded_when_the_state_moves(gpu_types):
    workload = row(gpu_types, S.PENDING)
    event = {"reason": "Running", "message": "Running on n1.", "source": "tracker"}
    assert workload_transition(workload=workload, allowed_from=(S.PENDING,), to=S.RUNNING,
                               event=event)
    # the same state again (a new reason): no event
    assert workload_transition(workload=workload, allowed_from=(S.RUNNING,), to=S.RUNNING,
                               reason="still running", event=event)
    # refused: no event
    assert not workload_transition(workload=workload, allowed_from=(S.PENDING,), to=S.RUNNING,
                                   event=event)
    events = list(WorkloadEvent.objects.filter(workload=workload).values_list(
        "reason", "message", "source"))
    assert events == [("Running", "Running on n1.", "tracker")]


# -- racing claims on PostgreSQL ---------------------------------------------------------------


def waiting_for_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


CLAIMS = {
    # the create task twice (a duplicated message): one creates, the other finds it claimed
    "two create tasks": (S.SUBMITTED, [(S.CREATING, {"launch_attempts": F("launch_attempts") + 1}),
                                       (S.CREATING, {"launch_attempts": F("launch_attempts") + 1})]),
    # a stop and the tracker's "running" at once: whichever locks first wins, the other is told
    "a stop and the tracker": (S.PENDING, [(S.STOPPING, {"stop_requested_at": timezone.now()}),
                                           (S.RUNNING, {"node": "gpu-node-1"})]),
}


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CLAIMS))
def test_two_claims_at_once_one_wins(gpu_types, case):
    assert connection.vendor == "postgresql"
    start, claims = CLAIMS[case]
    workload = row(gpu_types, start)
    # another transaction holds the row, so that both claims queue on its lock and are let go
    # together
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute("SELECT id FROM workloads_workload WHERE id = %s FOR UPDATE",
                       [workload.pk])
    results: dict[int, bool] = {}
    errors: list[str] = []

    def claim(i: int, to: str, fields: dict) -> None:
        try:
            results[i] = workload_transition(workload_id=workload.pk, allowed_from=(start,),
                                             to=to, **fields)
        except Exception as exc:  # noqa: BLE001 - any failure fails the test below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(i, to, fields))
               for i, (to, fields) in enumerate(claims)]
    try:
        for thread in threads:
            thread.start()
        eventually(lambda: waiting_for_locks() >= len(threads), timeout=60, interval=0.05,
                   message="the claims never waited for the row lock")
    finally:
        holder.rollback()
        holder.close()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(results.values()) == [False, True]
    winner = next(i for i, won in results.items() if won)
    workload.refresh_from_db()
    assert workload.state == claims[winner][0]
    assert workload.launch_attempts == (1 if case == "two create tasks" else 0)


# -- nothing writes a workload's state another way ---------------------------------------------

THE_MACHINE = Path("workloads/transitions.py")
# other models with a `state` of their own, by the name their writes start from
OTHER_MODELS = {"Tenant", "tenant", "TenantCluster"}


def state_writes(source: str) -> list[int]:
    """Lines that write a workload's `state` (tests/state_writes.py: every way of writing one),
    the writes of other models' states aside."""
    return sorted({write.line for write in writes_of_any_state(source)
                   if write.root not in OTHER_MODELS})


def test_the_check_finds_each_way_of_writing_a_state():
    written = """
Workload.objects.filter(pk=1).update(state="running", reason="")
workload.state = Workload.State.STOPPING
workload.save(update_fields=["state", "reason"])
Workload.objects.bulk_update(rows, ["state"])
setattr(workload, "state", "failed")
qs.update(**{"reason": "x"}, state="failed")
qs.update(**{"state": "failed"})
changes: dict = {"reason": "", "state": "running"}
qs.update(**changes)
more = {}
more["state"] = "queued"
Workload.objects.filter(pk=2).update(**more)
"""
    assert state_writes(written) == [2, 3, 4, 5, 6, 7, 8, 10, 13]
    not_written = """
Workload.objects.filter(pk=1, state="creating").update(reason="waiting")
Tenant.objects.filter(pk=1).update(state="deleted")
tenant.state = Tenant.State.DELETING
workload.save(update_fields=["object_name", "launch_spec"])
Workload.objects.filter(state__in=ACTIVE).count()
fields = {"reason": "x"}
Workload.objects.filter(pk=1).update(**fields)
"""
    assert state_writes(not_written) == []
    # and it sees the one place that does write it
    assert state_writes((REPO / THE_MACHINE).read_text())


def test_every_workload_state_write_goes_through_the_transition():
    offenders = []
    modules = project_modules()
    assert THE_MACHINE in modules and Path("usage/culling.py") in modules  # it reads the apps
    for relative in modules:
        if relative == THE_MACHINE:
            continue
        for line in state_writes((REPO / relative).read_text()):
            offenders.append(f"{relative}:{line}")
    assert offenders == [], ("write workload states with transitions.workload_transition: "
                             f"{offenders}")


# -- the state machine is the app's lowest writer -------------------------------------------

THE_JOURNAL = Path("workloads/journal.py")
# the app's layers above its writers, by name: whatever a new module there imports
ABOVE = ("services", "tasks", "views", "admin_views", "urls", "api", "notices", "tracking",
         "management")


def test_the_state_machine_imports_nothing_above_it_in_the_app():
    """transitions.py records its events through the journal (journal.py), never through the
    services, tasks, notices or tracker that call it: the lowest writer does not reach up."""
    # above it: every module that imports it, directly or through others, and the layers above
    above = modules_above(THE_MACHINE)
    assert {"workloads.services", "workloads.tasks", "workloads.tracking.states",
            "workloads.api.views"} <= above  # deferred imports included
    for module in (THE_MACHINE, THE_JOURNAL):
        reaching_up = {name for name in app_imports(module)
                       if name in above or name.split(".")[1] in ABOVE}
        assert reaching_up == set(), f"{module} imports {sorted(reaching_up)}"
    assert "workloads.journal" in app_imports(THE_MACHINE)
    assert app_imports(THE_JOURNAL) == {"workloads.models"}
