"""What reservations tell people: the owners of borrowing workloads an hour ahead (once), a
launch on borrowed GPUs that would run into another tenant's reservation (before submit), and
the booker of an occurrence released unused after the grace (its GPUs bookable again).

Workloads are rows made in the database (tests/fixtures/factories.py); the time is moved with
time-machine."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.test import TestCase
from django.utils import timezone

from calendars.models import CalendarVersion, Reservation, ReservationOccurrence
from calendars.reservations import reservation_launch_advice, reservations_tick
from calendars.selectors import booked_intervals
from identity.client import KeystoneClient
from notifications.models import Notification
from tenants.models import Quota, Tenant
from tenants.selectors import quota_adjustment_lines
from tests.fixtures import factories
from tests.support.calendars import END, START, book
from workloads.advice import launch_context
from workloads.models import Workload

pytestmark = pytest.mark.django_db

S = Workload.State


@pytest.fixture
def tenants(db, gpu_types) -> dict[str, Tenant]:
    made = {}
    for name in ("vision-lab", "nlp-lab", "bio-lab"):
        made[name] = factories.make_tenant(name, gpus_by_type={"a100": 4})
    return made


@pytest.fixture
def users(db):
    model = get_user_model()
    return {name: model.objects.create(username=name, keystone_user_id=f"id-{name}")
            for name in ("ann", "bob", "cid", "dee")}


def tick(at: dt.datetime):
    with time_machine.travel(at, tick=False), TestCase.captureOnCommitCallbacks(execute=False):
        return reservations_tick()


def running(tenant, owner, *, gpus: int, started: dt.datetime, max_runtime: int | None = None,
            name: str = "train", state: str = S.RUNNING) -> Workload:
    return factories.make_workload(
        tenant, owner, name=name, gpu_count=gpus, state=state, started_at=started,
        max_runtime_minutes=max_runtime,
        expires_at=started + dt.timedelta(minutes=max_runtime) if max_runtime else None)


def told(kind: str = "reservation") -> list[tuple[str, int | None, str]]:
    return list(Notification.objects.filter(kind=kind).order_by("pk")
                .values_list("user__username", "workload_id", "text"))


def test_borrowers_are_warned_an_hour_ahead_once(tenants, users, gpu_types):
    vision, nlp, bio = tenants["vision-lab"], tenants["nlp-lab"], tenants["bio-lab"]
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    early = START - dt.timedelta(hours=3)
    # nlp-lab holds 6 a100 of its 4: borrowing; its runs that go on past 09:00 are warned
    endless = running(nlp, users["ann"], gpus=4, started=early)
    long = running(nlp, users["bob"], gpus=1, started=early, max_runtime=4 * 60)
    running(nlp, users["cid"], gpus=1, started=early, max_runtime=60)  # ends 07:00: not told
    # bio-lab holds 3 of its 4, vision-lab is the one reserving: neither is told
    running(bio, users["dee"], gpus=3, started=early)
    running(vision, users["dee"], gpus=8, started=early, name="own")

    assert not tick(START - dt.timedelta(minutes=61)).warned
    assert told() == []
    result = tick(START - dt.timedelta(minutes=59))
    assert result.warned == [(reservation.pk, START)]
    assert told() == [
        ("ann", endless.pk, f"vision-lab's reservation of 4 a100 starts at 2030-03-04 09:00 UTC; "
                            f"#{endless.pk} runs on borrowed GPUs and may be reclaimed then."),
        ("bob", long.pk, f"vision-lab's reservation of 4 a100 starts at 2030-03-04 09:00 UTC; "
                         f"#{long.pk} runs on borrowed GPUs and may be reclaimed then.")]
    # the next minutes' beats tell nobody again
    assert not tick(START - dt.timedelta(minutes=58)).warned
    assert not tick(START - dt.timedelta(minutes=30)).warned
    assert len(told()) == 2
    assert ReservationOccurrence.objects.get(reservation=reservation).warned_at == \
        START - dt.timedelta(minutes=59)


def test_an_unused_reservation_is_released_after_the_grace_and_its_booker_told(
        cluster, tenants, users, gpu_types, settings):
    settings.PORTAL_RESERVATION_GRACE_MINUTES = 30
    vision = tenants["vision-lab"]
    with time_machine.travel(START - dt.timedelta(days=1), tick=True):
        reservation = book(vision, gpu_types, count=16, user=users["ann"])
        # the cluster's 16 a100 are all booked: no one else gets any of that time
        with pytest.raises(Exception, match="0 of its 16 a100 GPUs left"):
            book(tenants["nlp-lab"], gpu_types, count=1, start=START + dt.timedelta(hours=1))
    # vision-lab runs within its own quota of 4: that never needed the reservation
    running(vision, users["bob"], gpus=4, started=START - dt.timedelta(hours=1))
    assert tick(START + dt.timedelta(minutes=1)).quotas == {"vision-lab": {"a100": 16}}
    assert not tick(START + dt.timedelta(minutes=30)).released  # 29 minutes applied
    assert told() == []

    release_at = START + dt.timedelta(minutes=31)
    result = tick(release_at)
    assert result.released == [(reservation.pk, START)]
    assert result.quotas == {"vision-lab": {}}  # the boost off at once
    assert quota_adjustment_lines(Quota.objects.get(tenant=vision)) == []
    row = ReservationOccurrence.objects.get(reservation=reservation)
    assert (row.released_at, row.ended_at) == (release_at, release_at)
    assert told() == [("ann", None,
                       "vision-lab's reservation of 16 a100 from 2030-03-04 09:00 UTC to "
                       "2030-03-04 17:00 UTC was released at 2030-03-04 09:31 UTC: nothing "
                       "used its GPUs in the first 30 minutes (the project held no more a100 "
                       "GPUs than its own quota and had none waiting). They are back in the "
                       "pool and can be booked again.")]
    assert not tick(START + dt.timedelta(minutes=32)).acted  # once
    assert len(told()) == 1
    # bookable again from the release on
    assert [(i.start, i.end) for i in booked_intervals(gpu_types["a100"], START, END)] == \
        [(START, release_at)]
    with time_machine.travel(START + dt.timedelta(minutes=40), tick=True):
        later = book(tenants["nlp-lab"], gpu_types, count=16,
                     start=START + dt.timedelta(hours=1))
    assert later.pk


@pytest.mark.parametrize("use", ["beyond", "waiting", "earlier"])
def test_a_used_reservation_is_kept(tenants, users, gpu_types, use):
    """Used: beyond the own quota of 4 at some moment since it was applied (a job that has
    finished since counts), or something of the type waiting in the queue now."""
    vision = tenants["vision-lab"]
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + dt.timedelta(minutes=1))
    if use == "beyond":
        running(vision, users["ann"], gpus=6, started=START + dt.timedelta(minutes=5))
    elif use == "waiting":
        running(vision, users["ann"], gpus=2, started=START, state=S.QUEUED)
    else:
        job = running(vision, users["ann"], gpus=5, started=START + dt.timedelta(minutes=2),
                      state=S.SUCCEEDED)
        Workload.objects.filter(pk=job.pk).update(finished_at=START + dt.timedelta(minutes=9))
    for minutes in (31, 45, 120):
        assert not tick(START + dt.timedelta(minutes=minutes)).released
    assert ReservationOccurrence.objects.get(reservation=reservation).released_at is None
    assert [(a.source, a.gpu_type, a.gpus)
            for a in quota_adjustment_lines(Quota.objects.get(tenant=vision))] == \
        [("reservation", "a100", 4)]


def test_a_borrowing_launch_is_told_of_a_reservation_within_its_runtime(
        tenants, users, gpu_types, settings):
    settings.PORTAL_QUEUEING = "kueue"
    vision, nlp = tenants["vision-lab"], tenants["nlp-lab"]
    Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=4,
                               start=START, end=END)
    running(nlp, users["ann"], gpus=3, started=START - dt.timedelta(hours=5))

    def advice(tenant, gpus: int, runtime: int | None) -> list[tuple[str, str]]:
        with time_machine.travel(START - dt.timedelta(hours=2), tick=False):
            return reservation_launch_advice(launch_context(
                tenant=tenant, user=users["bob"], gpu_type=gpu_types["a100"],
                gpus_per_node=gpus, max_runtime_minutes=runtime))

    # 3 held + 2 = 5 of nlp-lab's 4: borrowed; 3 hours run into 09:00
    assert advice(nlp, 2, 180) == [(
        "warning", "Beyond nlp-lab's quota of 4 a100 GPUs this launch runs on borrowed GPUs; "
                   "vision-lab's reservation of 4 a100 starts at 2030-03-04 09:00 UTC, within "
                   "its maximum runtime (180 min): it may be reclaimed then.")]
    assert "and it has no maximum runtime: it may be reclaimed" in advice(nlp, 2, None)[0][1]
    assert advice(nlp, 2, 60) == []  # done by 08:00
    assert advice(nlp, 1, 180) == []  # within its own quota
    assert advice(vision, 8, 180) == []  # its own reservation
    settings.PORTAL_QUEUEING = "off"  # nothing is borrowed without Kueue
    assert advice(nlp, 2, 180) == []


def test_the_launch_check_looks_a_year_ahead_for_the_first_reservation_only(
        tenants, users, gpu_types, settings, monkeypatch):
    """With no maximum runtime a borrowing launch is checked against a year of reservations:
    the first occurrence to start is found from at most two of each reservation's occurrences
    (the first cut listed every occurrence of the year, and every week of a weekly one), the
    one running now not counted."""
    settings.PORTAL_QUEUEING = "kueue"
    vision, nlp, bio = tenants["vision-lab"], tenants["nlp-lab"], tenants["bio-lab"]
    now = START - dt.timedelta(hours=2)
    week = dt.timedelta(days=7)
    # vision-lab's weekly booking runs now (since an hour) and again in a week
    weekly = Reservation.objects.create(
        tenant=vision, gpu_type=gpu_types["a100"], count=4,
        start=now - week - dt.timedelta(hours=1), end=now - week + dt.timedelta(hours=7),
        recurrence="weekly", until=now + dt.timedelta(days=300))
    later = Reservation.objects.create(tenant=bio, gpu_type=gpu_types["a100"], count=2,
                                       start=now + dt.timedelta(days=3),
                                       end=now + dt.timedelta(days=3, hours=4))
    for day in range(10, 300, 10):  # and a year of bookings after those
        start = now + dt.timedelta(days=day)
        Reservation.objects.create(tenant=bio, gpu_type=gpu_types["a100"], count=1, start=start,
                                   end=start + dt.timedelta(hours=2))
    running(nlp, users["ann"], gpus=4, started=now - dt.timedelta(hours=5))
    computed = []
    occurrences = Reservation.occurrences

    def counted(self, since, until):
        for occurrence in occurrences(self, since, until):
            computed.append(self.pk)
            yield occurrence

    monkeypatch.setattr(Reservation, "occurrences", counted)

    def advice() -> str:
        with time_machine.travel(now, tick=False):
            notes = reservation_launch_advice(launch_context(
                tenant=nlp, user=users["bob"], gpu_type=gpu_types["a100"], gpus_per_node=1))
        return next(text for level, text in notes if level == "warning")

    assert "bio-lab's reservation of 2 a100 starts at 2030-03-07 07:00 UTC" in advice()
    assert max(computed.count(pk) for pk in set(computed)) <= 2
    Reservation.objects.filter(pk=later.pk).update(cancelled_at=now)
    computed.clear()
    assert "vision-lab's reservation of 4 a100 starts at 2030-03-11 06:00 UTC" in advice()
    assert computed.count(weekly.pk) == 2  # the one running now, and the next


def _version_locked() -> bool:
    """Whether a transaction holds the calendar version's row (a write of the calendar, whose
    trigger changed the token, not yet committed), asked from a connection of its own."""
    found: list[bool] = []

    def probe() -> None:
        try:
            with transaction.atomic():
                CalendarVersion.objects.select_for_update(nowait=True).filter(pk=1).first()
            found.append(False)
        except DatabaseError:
            found.append(True)
        finally:
            connection.close()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join(30)
    return found[0]


@pytest.mark.django_db(transaction=True)
def test_an_occurrence_is_released_with_keystone_asked_outside_the_calendars_lock(
        as_user, keystone, gpu_types, settings, monkeypatch):
    """An occurrence booked by no one the portal knows is released unused: its project's
    managers are asked of the real Keystone, and while Keystone answers, no transaction of this
    release is open and the calendar version's row (which the release's claim locks until its
    commit) is free for every other writer of the calendar."""
    settings.PORTAL_RESERVATION_GRACE_MINUTES = 30
    as_user("lead", "vision-lab")  # the portal knows vision-lab's manager
    vision = Tenant.objects.get(name="vision-lab")
    now = timezone.now()
    start = now - dt.timedelta(minutes=40)
    reservation = Reservation.objects.create(tenant=vision, gpu_type=gpu_types["a100"], count=4,
                                             start=start, end=now + dt.timedelta(hours=3))
    with transaction.atomic():  # the probe sees a calendar write in progress
        Reservation.objects.filter(pk=reservation.pk).update(note="booked for a course")
        assert _version_locked()
    assert not _version_locked()
    assert reservations_tick(start + dt.timedelta(minutes=1)).applied

    asked: list[tuple[bool, bool]] = []
    real = KeystoneClient.user_project_roles

    def watched(client: KeystoneClient, token_id: str, user_id: str, project_id: str):
        asked.append((connection.in_atomic_block, _version_locked()))
        return real(client, token_id, user_id, project_id)

    monkeypatch.setattr(KeystoneClient, "user_project_roles", watched)
    cache.clear()  # Keystone is asked, not a remembered answer
    result = reservations_tick(now)
    assert result.released == [(reservation.pk, start)]
    assert asked == [(False, False)]  # asked once, outside any transaction and any lock
    assert list(Notification.objects.filter(kind="reservation")
                .values_list("user__name", flat=True)) == ["lead"]
    assert ReservationOccurrence.objects.get(reservation=reservation).released_at == now
