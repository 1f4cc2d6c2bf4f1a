"""GPU reservations on the real control plane with Kueue: at its start a reservation
raises its project's ClusterQueue nominal quota, and Kueue reclaims the GPUs another project
borrowed (its owner was told an hour before, and is told of the reclaim through the tracker's
path); an unused reservation is released after its grace and the queue goes back down; at the end
the workloads Kueue admitted beyond the lowered queue are put back in line by the portal.

The portal's clock is moved with time-machine (the beat's ticks); Kueue and the tracker run on
the real clock. The demo inventory has 16 A100s; the cohort's nominal quotas are what Kueue
lends and reclaims, so the projects here hold 4 each: what the borrower runs beyond its own 4 is
the reserving project's idle quota."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.test import TestCase
from django.utils import timezone

from calendars.models import ReservationOccurrence
from calendars.reservations import reservations_tick
from calendars.services import reservation_create
from kube.client import Kube
from notifications.models import Notification
from tests.support.kueue import launch, make_tenant, nominal_a100, queued_cluster  # noqa: F401
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State


def user(name: str):
    from identity.models import User

    return User.objects.create(username=f"{name}-{uuid.uuid4().hex[:8]}")


def tick(at: dt.datetime):
    """The calendar's beat at `at` (the portal's clock), the reconciles it enqueues run here."""
    with time_machine.travel(at, tick=True), \
            TestCase.captureOnCommitCallbacks(execute=False) as enqueued:
        result = reservations_tick()
    for callback in enqueued:  # on the real clock: the API server's certificates are current
        callback()
    return result


def book(tenant, gpu_types, *, count: int, start: dt.datetime, booker):
    return reservation_create(tenant=tenant, acting_user=booker, within_allowance=False,
                              fields={"gpu_type": gpu_types["a100"], "count": count,
                                      "start": start, "end": start + dt.timedelta(hours=4),
                                      "note": "course"})


def test_a_reservation_raises_the_queue_at_its_start_and_reclaims_a_borrower(
        queued_cluster, kueue_cluster, gpu_types, eager_celery):  # noqa: F811
    reserving = make_tenant(queued_cluster, a100=4)
    borrower = make_tenant(queued_cluster, a100=4)
    ann, bob = user("ann"), user("bob")
    tracker = Tracker()
    big = launch(borrower, bob, gpu_types, name="big", gpus=8, run_seconds=900)
    track_until(tracker, lambda: state_of(big).state == S.RUNNING, timeout=60,
                describe=lambda: f"{big.state}: {big.reason}")  # 4 of them borrowed
    start = (timezone.now() + dt.timedelta(hours=2)).replace(second=0, microsecond=0)
    reservation = book(reserving, gpu_types, count=4, start=start, booker=ann)

    # an hour ahead: the borrower's owner is told
    assert tick(start - dt.timedelta(minutes=59)).warned == [(reservation.pk, start)]
    warning, = Notification.objects.filter(kind="reservation", workload_id=big.pk)
    assert warning.user == bob
    assert f"#{big.pk} runs on borrowed GPUs and may be reclaimed then" in warning.text

    # before the start, 8 GPUs are beyond the reserving project's 4: they wait, borrowing
    # preempts no one
    own = launch(reserving, ann, gpu_types, name="own", gpus=8, run_seconds=900)
    tracker.run_for(2.0)
    assert (state_of(own).state, state_of(big).state) == (S.QUEUED, S.RUNNING)

    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        assert nominal_a100(kube, reserving) == "4"
        # at its start: the nominal quota is 4 + 4 ...
        assert tick(start + dt.timedelta(seconds=30)).applied == [(reservation.pk, start)]
        assert nominal_a100(kube, reserving) == "8"
    # ... so the 8 are within it: Kueue takes the borrowed GPUs back for them
    track_until(tracker, lambda: state_of(big).state == S.QUEUED, timeout=90,
                describe=lambda: f"big {big.state}: {big.reason}")
    track_until(tracker, lambda: state_of(own).state == S.RUNNING, timeout=90,
                describe=lambda: f"own {own.state}: {own.reason}")
    # the borrower heard it an hour ahead, and then of the reclaim (the tracker's notice)
    assert list(Notification.objects.filter(workload_id=big.pk, kind__in=("reservation",
                                                                          "reclaim"))
                .order_by("pk").values_list("kind", flat=True)) == ["reservation", "reclaim"]
    assert big.events.filter(reason="Preempted", type="Warning").exists()


def test_an_unused_reservation_is_released_after_its_grace_and_the_queue_goes_back_down(
        queued_cluster, kueue_cluster, gpu_types, eager_celery, settings):  # noqa: F811
    settings.PORTAL_RESERVATION_GRACE_MINUTES = 30
    tenant = make_tenant(queued_cluster, a100=2)
    ann = user("ann")
    start = (timezone.now() + dt.timedelta(hours=1)).replace(second=0, microsecond=0)
    reservation = book(tenant, gpu_types, count=4, start=start, booker=ann)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        tick(start + dt.timedelta(minutes=1))
        assert nominal_a100(kube, tenant) == "6"
        assert not tick(start + dt.timedelta(minutes=30)).released
        assert tick(start + dt.timedelta(minutes=31)).released == [(reservation.pk, start)]
        assert nominal_a100(kube, tenant) == "2"
    assert ReservationOccurrence.objects.get(reservation=reservation).released_at is not None
    notice, = Notification.objects.filter(kind="reservation", user=ann)
    assert notice.title == f"Reservation #{reservation.pk} released unused"
    # Kueue took the lowered queue: its status reports it active at the new quota
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        eventually(lambda: any(c["type"] == "Active" and c["status"] == "True" for c in
                               (kube.get("ClusterQueue", tenant.namespace).get("status") or {})
                               .get("conditions") or []),
                   timeout=30, message="the lowered queue is not active")


def test_an_overbooking_is_refused_against_the_real_clusters_gpus(
        queued_cluster, kueue_cluster, gpu_types):  # noqa: F811
    """The capacity a booking is checked against is the real cluster's: its KWOK nodes' 16
    A100s (read through the portal's cluster cache), less a maintenance window on one node."""
    from calendars.services import Overbooked, window_create
    from calendars.validation import window_clean
    from tests.support.cluster import cluster_cache_caught_up

    cluster_cache_caught_up()
    vision, nlp = make_tenant(queued_cluster, a100=4), make_tenant(queued_cluster, a100=4)
    ann = user("ann")
    start = (timezone.now() + dt.timedelta(days=1)).replace(second=0, microsecond=0)
    book(vision, gpu_types, count=12, start=start, booker=ann)
    with pytest.raises(Overbooked, match="4 of its 16 a100 GPUs left to book"):
        book(nlp, gpu_types, count=5, start=start + dt.timedelta(hours=1), booker=ann)
    with TestCase.captureOnCommitCallbacks(execute=False):
        window_create(acting_user=None, fields=window_clean({
            "nodes": ["gpu-a100-2"], "reason": "PSU",
            "start": (start + dt.timedelta(hours=8)).isoformat(),
            "end": (start + dt.timedelta(hours=10)).isoformat()}))
    with pytest.raises(Overbooked, match=r"8 in maintenance\); 9 do not fit"):
        book(nlp, gpu_types, count=9, start=start + dt.timedelta(hours=7), booker=ann)
    assert book(nlp, gpu_types, count=8, start=start + dt.timedelta(hours=7), booker=ann).pk


def test_at_the_end_the_workloads_beyond_the_lowered_queue_are_put_back_in_line(
        queued_cluster, kueue_cluster, gpu_types, eager_celery, settings):  # noqa: F811
    """Kueue admits on the raised nominal quota and evicts nothing when it goes back down: at
    the end the portal tells the owner of the newest workload beyond it and, after the end's
    grace (one minute here), puts it back in line, where Kueue keeps it waiting; the older one,
    within the quota, runs on."""
    settings.PORTAL_RESERVATION_END_GRACE_MINUTES = 1
    tenant = make_tenant(queued_cluster, a100=2, borrowing=0)
    ann, bob = user("ann"), user("bob")
    tracker = Tracker()
    start = (timezone.now() + dt.timedelta(hours=1)).replace(second=0, microsecond=0)
    reservation = book(tenant, gpu_types, count=4, start=start, booker=ann)
    end = start + dt.timedelta(hours=4)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        tick(start + dt.timedelta(seconds=30))
        assert nominal_a100(kube, tenant) == "6"
    first = launch(tenant, ann, gpu_types, name="first", gpus=2, run_seconds=900)
    second = launch(tenant, bob, gpu_types, name="second", gpus=3, run_seconds=900)
    track_until(tracker, lambda: (state_of(first).state, state_of(second).state)
                == (S.RUNNING, S.RUNNING), timeout=90,
                describe=lambda: f"first {first.state}, second {second.state}: {second.reason}")

    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        ended = tick(end + dt.timedelta(seconds=10))
        assert ended.excess_told == {(reservation.pk, start): [second.pk]}
        assert nominal_a100(kube, tenant) == "2"
    # Kueue evicts nothing on the lowered quota: both run on through the grace
    tracker.run_for(3.0)
    assert (state_of(first).state, state_of(second).state) == (S.RUNNING, S.RUNNING)
    notice, = Notification.objects.filter(kind="reservation", workload_id=second.pk)
    assert notice.user == bob and "it is put back in line" in notice.text
    assert not tick(end + dt.timedelta(seconds=50)).requeued

    settled = tick(end + dt.timedelta(minutes=1, seconds=10))
    assert (settled.requeued, settled.stopped) == ([second.pk], [])
    copy = Workload.objects.get(idempotency_key=f"requeue-of-{second.pk}")
    track_until(tracker, lambda: state_of(second).state == S.STOPPED, timeout=60,
                describe=lambda: f"second {second.state}: {second.reason}")
    # back in line: 2 of the 2 are used, so Kueue keeps the copy waiting; the older runs on
    track_until(tracker, lambda: state_of(copy).state == S.QUEUED, timeout=60,
                describe=lambda: f"copy {copy.state}: {copy.reason}")
    tracker.run_for(2.0)
    assert (state_of(first).state, state_of(copy).state) == (S.RUNNING, S.QUEUED)
    assert ReservationOccurrence.objects.get(reservation=reservation).excess_done_at is not None
