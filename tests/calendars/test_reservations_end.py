"""A reservation's end (or its cancellation) on kubesim: the quota goes back down, the owners of
the workloads that hold GPUs of the type beyond it are told at once (the newest first, as many as
it takes), and those still beyond it after PORTAL_RESERVATION_END_GRACE_MINUTES are put back in
line (batch jobs) or stopped (services), audited; a project back within its quota by then keeps
its workloads; the beat does each step once; a cancelled occurrence's used part keeps counting
against the allowance. The time is moved with time-machine."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import TestCase

from audit.models import AuditRecord
from calendars.models import Reservation, ReservationAllowance, ReservationOccurrence
from calendars.reservations import reservations_tick
from calendars.services import AllowanceExceeded, reservation_cancel, reservation_create
from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID
from notifications.models import Notification
from tenants.models import Tenant
from tests.fixtures import factories
from tests.support.calendars import END, START, book, launch, make_tenant
from tests.support.tracking import state_of
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.services import AdmissionRefused
from workloads.tasks import workload_create_task

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture
def users(db):
    model = get_user_model()
    return {name: model.objects.create(username=name, keystone_user_id=f"id-{name}")
            for name in ("ann", "bob", "cid", "lead")}


@pytest.fixture
def vision(db, gpu_types) -> Tenant:
    return factories.make_tenant("vision-lab", gpus_by_type={"a100": 4})


def tick(at: dt.datetime, *, run: bool = False):
    """One beat at `at`; with `run`, what it sends on commit runs (eager_celery), else it is
    dropped (no cluster)."""
    with time_machine.travel(at, tick=False), TestCase.captureOnCommitCallbacks(execute=run):
        return reservations_tick()


def row(tenant, owner, *, gpus: int, name: str, kind: str = "batch", state: str = S.RUNNING,
        gpu_type: str = "a100") -> Workload:
    """A workload row (no cluster objects): a batch job, or a service (kind="service")."""
    fields = ({"kind": "batch", "template": "custom", "image": "busybox:1.36", "port": None}
              if kind == "batch" else {})
    return factories.make_workload(tenant, owner, name=name, gpu_count=gpus, state=state,
                                   gpu_type=gpu_type, started_at=START, **fields)


def told(about: str = "reservation-excess:") -> list[tuple[str, int | None, str]]:
    """Who was told of the end (by default: after it, beyond the quota), in order."""
    return list(Notification.objects.filter(kind="reservation", key__startswith=about)
                .order_by("pk").values_list("user__username", "workload_id", "title"))


def states(*workloads: Workload) -> list[str]:
    return [state_of(w).state for w in workloads]


def copies() -> dict[int, Workload]:
    """The copies the requeue path submitted: {original id: copy}."""
    return {int(w.idempotency_key.removeprefix("requeue-of-")): w
            for w in Workload.objects.filter(idempotency_key__startswith="requeue-of-")}


def test_at_the_end_the_newest_beyond_the_quota_are_told_then_put_back_in_line(
        cluster, gpu_types, users, eager_celery, settings):
    """The finding as it was seen: 4 A100s reserved, launched on, then the end: the quota went
    back down, the workloads ran on beyond it for good. Now the newest beyond it are told at
    once and put back in line after the grace, and the project is back within its quota."""
    settings.PORTAL_RESERVATION_END_GRACE_MINUTES = 10
    tenant = make_tenant("vision-lab")  # 2 a100 of its own
    with time_machine.travel(START - dt.timedelta(hours=2), tick=True):
        reservation = book(tenant, gpu_types)  # + 4
    tick(START + MINUTE, run=True)
    with time_machine.travel(START + 2 * MINUTE, tick=True):
        first = launch(tenant, users["ann"], gpu_types, name="first", gpus=2)
        second = launch(tenant, users["bob"], gpu_types, name="second", gpus=3)
    for workload in (first, second):
        workload_create_task(workload.pk)
    assert set(states(first, second)) <= {S.PENDING, S.RUNNING}

    # the end: 5 held, 2 allowed; the newest (3 GPUs) is enough to get back within it
    ended = tick(END + dt.timedelta(seconds=10), run=True)
    assert ended.ended == [(reservation.pk, START)] and ended.quotas == {"vision-lab": {}}
    assert ended.excess_told == {(reservation.pk, START): [second.pk]}
    assert told() == [("bob", second.pk, f"second (#{second.pk}) is beyond vision-lab's quota: "
                                         f"put back in line at 2030-03-04 17:10 UTC")]
    text = Notification.objects.get(workload_id=second.pk, kind="reservation").text
    assert text == (f"vision-lab's reservation of 4 a100 ended at 2030-03-04 17:00 UTC: "
                    f"vision-lab may hold 2 a100 GPUs again and holds 5. #{second.pk} is among "
                    f"its newest beyond that: at 2030-03-04 17:10 UTC it is put back in line "
                    f"(its run stopped and submitted again, to wait its turn), unless the "
                    f"project is back within its quota by then. Stop it, or free a100 GPUs, "
                    f"to keep it from happening.")
    with pytest.raises(AdmissionRefused, match="uses 5 of 2 a100 GPUs"):
        launch(tenant, users["ann"], gpu_types, name="more", gpus=1)

    # within the grace nothing is touched
    assert not tick(END + 9 * MINUTE, run=True).acted
    assert set(states(first, second)) <= {S.PENDING, S.RUNNING}

    # after it: the newest put back in line through the requeue path, the older runs on
    settled = tick(END + 10 * MINUTE + dt.timedelta(seconds=10), run=True)
    assert (settled.requeued, settled.stopped) == ([second.pk], [])
    assert state_of(second).state in (S.STOPPING, S.STOPPED)
    assert state_of(first).state in (S.PENDING, S.RUNNING)
    copy = copies()[second.pk]
    assert (copy.owner, copy.gpu_count) == (users["bob"], 3)
    with cluster.api_client() as client:
        kube = Kube(client)
        eventually(lambda: not [p for p in kube.list(
            "Pod", tenant.namespace, label_selector=f"{LABEL_WORKLOAD_ID}={second.pk}")["items"]
            if not (p["metadata"].get("deletionTimestamp"))],
            message="the requeued run's pod is still there")
    record = AuditRecord.objects.get(action="reservation.end_enforce")
    assert (record.actor_name, record.tenant_id, record.target) == \
        ("system", tenant.pk, f"reservation #{reservation.pk}")
    assert record.before == {"occurrence": START.isoformat(), "held": 5, "quota": 2,
                             "told": [second.pk]}
    assert record.after == {"requeued": [second.pk], "stopped": []}
    assert AuditRecord.objects.filter(action="workload.requeue").count() == 1
    # done once: later beats leave the older run alone
    assert not tick(END + 30 * MINUTE, run=True).acted
    assert state_of(first).state in (S.PENDING, S.RUNNING)


def test_a_cancelled_reservation_is_acted_on_at_once_and_its_services_stopped(
        cluster, users, gpu_types, eager_celery, settings):
    """Cancelled while it runs: the cancel sends the beat, which lowers the quota and tells
    at once; after the grace the service beyond the quota is stopped, the batch job within it
    runs on."""
    settings.PORTAL_RESERVATION_END_GRACE_MINUTES = 10
    vision = make_tenant("vision-lab", a100=4, gpus_total=8)
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + MINUTE)
    job = row(vision, users["ann"], gpus=4, name="job")
    notebook = row(vision, users["bob"], gpus=3, name="notebook", kind="service")
    cancel_at = START + dt.timedelta(hours=2)
    with time_machine.travel(cancel_at, tick=False), \
            TestCase.captureOnCommitCallbacks(execute=True):
        assert reservation_cancel(reservation=reservation, acting_user=users["lead"])
    # the beat the cancel sent did the end: quota down, the newest beyond it told
    occurrence = ReservationOccurrence.objects.get(reservation=reservation)
    assert (occurrence.ended_at, occurrence.excess_told_at) == (cancel_at, cancel_at)
    assert occurrence.excess_workloads == [notebook.pk]
    assert occurrence.excess_due_at == cancel_at + dt.timedelta(minutes=10)
    assert told() == [("bob", notebook.pk, f"notebook (#{notebook.pk}) is beyond vision-lab's "
                                           f"quota: stopped at 2030-03-04 11:10 UTC")]
    assert "reservation of 4 a100 was cancelled at 2030-03-04 11:00 UTC: vision-lab may hold " \
        "4 a100 GPUs again and holds 7." in Notification.objects.get(kind="reservation").text

    settled = tick(cancel_at + 10 * MINUTE, run=True)
    assert (settled.requeued, settled.stopped) == ([], [notebook.pk])
    assert state_of(job).state == S.RUNNING
    assert state_of(notebook).state in (S.STOPPING, S.STOPPED)
    assert "was cancelled at 2030-03-04 11:00 UTC, and vision-lab still held 7 a100 GPUs, " \
        "beyond its quota of 4, 10 minutes later." in state_of(notebook).reason
    assert copies() == {}


def test_the_newest_are_chosen_as_many_as_it_takes(vision, users, gpu_types):
    """Beyond the quota then in force: the tenant's own 4 and its other reservation still
    running (2). Only admitted workloads of the type hold GPUs: a queued launch, another
    type, another project, a finished run do not count and are never chosen."""
    nlp = factories.make_tenant("nlp-lab", gpus_by_type={"a100": 4})
    ending = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=6,
                                        start=START, end=END)
    Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=2,
                               start=START, end=END + dt.timedelta(hours=1))
    tick(START + MINUTE)
    with time_machine.travel(START + 2 * MINUTE, tick=True):
        oldest = row(vision, users["ann"], gpus=4, name="oldest")
        older = row(vision, users["ann"], gpus=2, name="older")
        middle = row(vision, users["bob"], gpus=2, name="middle", kind="service")
        newer = row(vision, users["cid"], gpus=1, name="newer")
        newest = row(vision, users["cid"], gpus=2, name="newest", state=S.PENDING)
        row(vision, users["cid"], gpus=4, name="queued", state=S.QUEUED)
        row(vision, users["cid"], gpus=1, name="done", state=S.SUCCEEDED)
        row(vision, users["cid"], gpus=4, name="v100", gpu_type="v100")
        row(nlp, users["cid"], gpus=4, name="elsewhere")
    # 11 held, 4 + 2 allowed: 5 too many: newest (2), newer (1), middle (2)
    result = tick(END + MINUTE)
    assert result.ended == [(ending.pk, START)]
    assert result.excess_told == {(ending.pk, START): [newest.pk, newer.pk, middle.pk]}
    assert [w for _, w, _ in told()] == [newest.pk, newer.pk, middle.pk]
    # the other one ends within the hour: what would be beyond the quota then is told too
    assert [w for _, w, _ in told("reservation-ends:")] == [newest.pk, newer.pk, middle.pk,
                                                            older.pk]
    assert Notification.objects.get(workload_id=middle.pk,
                                    key__startswith="reservation-excess:").title.endswith(
        "stopped at 2030-03-04 17:11 UTC")
    settled = tick(END + 11 * MINUTE)
    assert (settled.requeued, settled.stopped) == ([newest.pk, newer.pk], [middle.pk])
    assert states(oldest, older) == [S.RUNNING, S.RUNNING]
    assert sorted(copies()) == sorted([newest.pk, newer.pk])


def test_a_project_back_within_its_quota_by_the_deadline_keeps_its_workloads(
        vision, users, gpu_types):
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + MINUTE)
    long = row(vision, users["ann"], gpus=4, name="long")
    short = row(vision, users["bob"], gpus=3, name="short")
    assert tick(END + MINUTE).excess_told == {(reservation.pk, START): [short.pk]}
    # it finished by itself within the grace: 4 held, 4 allowed
    Workload.objects.filter(pk=short.pk).update(state=S.SUCCEEDED, finished_at=END + 5 * MINUTE)
    settled = tick(END + 11 * MINUTE)
    assert (settled.requeued, settled.stopped) == ([], [])
    assert state_of(long).state == S.RUNNING
    assert not AuditRecord.objects.filter(action__in=("reservation.end_enforce",
                                                      "workload.stop")).exists()
    assert ReservationOccurrence.objects.get(reservation=reservation).excess_done_at == \
        END + 11 * MINUTE

    # and a weekly one whose next occurrence began by the deadline: within it again
    weekly = Reservation.objects.create(
        tenant=vision, gpu_type=gpu_types["a100"], count=4, start=START, end=END,
        recurrence=Reservation.Recurrence.WEEKLY, until=START + dt.timedelta(days=20))
    week = dt.timedelta(days=7)
    tick(START + week + MINUTE)
    again = row(vision, users["bob"], gpus=3, name="again")
    assert tick(END + week + MINUTE).excess_told == {(weekly.pk, START + week): [again.pk]}
    Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=4,
                               start=END + week + 5 * MINUTE, end=END + week + 4 * 60 * MINUTE)
    tick(END + week + 6 * MINUTE)
    assert tick(END + week + 11 * MINUTE).stopped == [] and state_of(again).state == S.RUNNING


def test_the_end_is_acted_on_once_and_a_killed_run_resumes(vision, users, gpu_types):
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + MINUTE)
    service = row(vision, users["ann"], gpus=6, name="notebook", kind="service")
    first = tick(END + MINUTE)
    assert first.excess_told == {(reservation.pk, START): [service.pk]}
    assert not tick(END + MINUTE + dt.timedelta(seconds=20)).acted  # run twice: once
    assert len(told()) == 1
    settled = tick(END + 11 * MINUTE)
    assert settled.stopped == [service.pk]
    assert not tick(END + 11 * MINUTE + dt.timedelta(seconds=5)).acted
    assert AuditRecord.objects.filter(action="reservation.end_enforce").count() == 1
    assert AuditRecord.objects.filter(action="workload.stop").count() == 1

    # a run killed after the end's claim, before it told (its transaction rolled back: told
    # nothing): the next one tells; one killed before its deadline step: the next one acts
    other = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=4,
                                       start=END + dt.timedelta(hours=1),
                                       end=END + dt.timedelta(hours=2))
    tick(END + dt.timedelta(hours=1, minutes=1))
    job = row(vision, users["bob"], gpus=5, name="job")
    killed_at = END + dt.timedelta(hours=2, minutes=1)
    ReservationOccurrence.objects.filter(reservation=other).update(ended_at=killed_at)
    resumed = tick(killed_at + MINUTE)
    assert resumed.excess_told == {(other.pk, END + dt.timedelta(hours=1)): [job.pk]}
    assert tick(killed_at + 11 * MINUTE).requeued == [job.pk]


def test_the_hour_before_the_end_the_owners_beyond_the_quota_are_told(vision, users,
                                                                      gpu_types, settings):
    settings.PORTAL_RESERVATION_END_GRACE_MINUTES = 10
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + MINUTE)
    kept = row(vision, users["ann"], gpus=4, name="kept")
    beyond = row(vision, users["bob"], gpus=2, name="beyond", kind="service")
    assert not tick(END - 61 * MINUTE).end_warned
    assert tick(END - 59 * MINUTE).end_warned == [(reservation.pk, START)]
    assert not tick(END - 58 * MINUTE).end_warned  # once
    notice, = Notification.objects.filter(kind="reservation", key__startswith="reservation-ends:")
    assert (notice.user, notice.workload_id) == (users["bob"], beyond.pk)
    assert notice.text == (
        f"vision-lab's reservation of 4 a100 ends at 2030-03-04 17:00 UTC; then vision-lab may "
        f"hold 4 a100 GPUs again, and #{beyond.pk} is among its newest beyond that. If the "
        f"project still holds more then, it is stopped 10 minutes after the end. Stop it, or "
        f"free a100 GPUs, before then to keep it from happening.")
    assert kept.pk not in Notification.objects.values_list("workload_id", flat=True)


def test_a_cancelled_occurrence_counts_what_it_used_against_the_allowance(
        cluster, vision, users, gpu_types):
    """Cancelling while it runs gives back only what was not used yet: booking again cannot
    refill the allowance (32 GPU-hours: 4 GPUs for 8 hours)."""
    ReservationAllowance.objects.create(tenant=vision, gpu_hours=32, max_days_ahead=30)

    def manager_books(at: dt.datetime, hours: int):
        with time_machine.travel(at, tick=False), \
                TestCase.captureOnCommitCallbacks(execute=False):
            return reservation_create(
                tenant=vision, acting_user=users["lead"], within_allowance=True,
                fields={"gpu_type": gpu_types["a100"], "count": 4, "start": at + MINUTE,
                        "end": at + MINUTE + dt.timedelta(hours=hours), "note": ""})

    first = manager_books(START - MINUTE, 8)
    tick(START + MINUTE)
    cancel_at = START + dt.timedelta(hours=3)  # 12 GPU-hours used
    with time_machine.travel(cancel_at, tick=False), \
            TestCase.captureOnCommitCallbacks(execute=False):
        reservation_cancel(reservation=first, acting_user=users["lead"])
    with pytest.raises(AllowanceExceeded, match="it holds 12.0 and this one asks 32.0"):
        manager_books(cancel_at, 8)
    assert manager_books(cancel_at, 5).pk  # 12 + 20
    # after the cancelled one's planned end (and the second one's), nothing counts any more
    assert manager_books(END + MINUTE, 8).pk
