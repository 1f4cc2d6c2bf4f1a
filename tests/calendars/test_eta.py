"""The queue estimate knows the calendar: a maintenance window or another tenant's
reservation takes GPUs out of the pool for a while, and a waiter whose run cannot fit beside
it starts after it (workloads/eta.py's blocks, supplied by calendars through
workloads/queue.py's registry)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model

from calendars.capacity_plan import queue_blocks
from calendars.models import MaintenanceWindow, Reservation
from tenants.models import Tenant
from tests.fixtures import factories
from tests.fixtures.factories import make_workload
from workloads.eta import MAINTENANCE, RESERVATION, Block, Holder, Waiter, estimate_starts
from workloads.hooks import CAPACITY_BLOCKS
from workloads.models import Workload
from workloads.queue import estimates, queue_text

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def hours(n: float) -> dt.datetime:
    return NOW + dt.timedelta(hours=n)


def test_a_window_that_leaves_too_few_gpus_delays_a_run_that_would_overlap_it():
    """8 GPUs, all free; a window takes 6 from 13:00 to 15:00. A 4-GPU run of 2 h starting now
    would overlap it with 2 left: it starts at 15:00."""
    window = Block(hours(1), hours(3), 6)
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[],
                          queue=[Waiter("w", "a", 4, 2 * 3600)], blocks=[window])
    assert got["w"].start == hours(3)
    assert got["w"].basis == "from a maintenance window"


def test_a_run_that_ends_before_the_window_or_fits_beside_it_starts_now():
    window = Block(hours(1), hours(3), 6)
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[],
                          queue=[Waiter("short", "a", 4, 3600), Waiter("small", "b", 2, 7200)],
                          blocks=[window])
    assert got["short"].start == NOW  # ends at 13:00, as the window begins
    # beside "short" (until 13:00) and within the 2 GPUs the window leaves
    assert got["small"].start == NOW


def test_gpus_held_count_beside_the_window():
    """6 of 8 GPUs held until 14:00; the window takes 4 from 13:00 to 16:00. A 2-GPU run of
    3 h fits now (6 + 2 = 8) but not beside the window (6 held + 4 down): it starts at 16:00."""
    running = [Holder("a", 6, hours(2))]
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=running,
                          queue=[Waiter("w", "b", 2, 3 * 3600)],
                          blocks=[Block(hours(1), hours(4), 4)])
    assert got["w"].start == hours(4)
    assert got["w"].basis == "from maximum runtimes and a maintenance window"


def test_a_run_without_limit_starts_after_every_window_it_cannot_fit_beside():
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[],
                          queue=[Waiter("w", "a", 4, None)],
                          blocks=[Block(hours(1), hours(2), 8), Block(hours(30), hours(31), 8)])
    assert got["w"].start == hours(31)


def test_a_reservation_blocks_the_other_tenants_not_its_own():
    """nlp-lab's reservation of 6 from 13:00 to 15:00: vision-lab's 4-GPU run waits until its
    end; nlp-lab's own runs beside it (its reserved GPUs are its own)."""
    booked = Block(hours(1), hours(3), 6, "nlp", RESERVATION)
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[],
                          queue=[Waiter("theirs", "nlp", 4, 7200)], blocks=[booked])
    assert got["theirs"].start == NOW
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[],
                          queue=[Waiter("mine", "vision", 4, 7200)], blocks=[booked])
    assert got["mine"].start == hours(3)
    assert got["mine"].basis == "from another project's reservation"


def test_the_reserving_tenants_own_runs_count_towards_its_reservation():
    """nlp-lab holds 4 GPUs (inside its reservation of 6): 2 more are out for the others, so
    vision-lab's 2-GPU run fits (4 + 2 reserved + 2 = 8)."""
    got = estimate_starts(now=NOW, capacity=8, reach={}, running=[Holder("nlp", 4, hours(5))],
                          queue=[Waiter("w", "vision", 2, 7200)],
                          blocks=[Block(NOW, hours(3), 6, "nlp", RESERVATION)])
    assert got["w"].start == NOW


# --- through the database: calendars supplies the blocks to workloads/queue.py -------------

@pytest.fixture
def tenant(db, gpu_types) -> Tenant:
    tenant = factories.make_tenant("vision-lab", gpus_total=8, max_workloads=10)
    get_user_model().objects.create(username="ann", keystone_user_id="id-ann")
    return tenant


def window(start: dt.datetime, end: dt.datetime, gpus: int, **fields) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        start=start, end=end, reason="driver update",
        affected={"gpu-a100-1": {"gpu_type": "a100", "gpus": gpus}}, **fields)


def test_the_registry_is_filled_by_calendars():
    assert CAPACITY_BLOCKS.entries() == [("calendars", queue_blocks)]


def test_an_announced_window_delays_the_queue_estimate(tenant, gpu_types):
    """8 a100 free; a window takes all 8 from 13:00 to 15:00. A queued 4-GPU job of 2 h is
    expected at 15:00, not now (without the calendar it was now)."""
    now = NOW
    window(hours(1), hours(3), 8)
    job = make_workload(tenant, "ann", name="train", kind="batch", gpu_count=4,
                        state=Workload.State.QUEUED, max_runtime_minutes=120)
    estimate = estimates(gpu_types["a100"], capacity=8, now=now)[job.pk]
    assert estimate.start == hours(3)
    assert estimate.basis == "from a maintenance window"
    text = queue_text(job, _place(estimate), now=now)
    assert text == "queued — position 1 of 1 for a100, about 3.0 h", text


def _place(estimate):
    from workloads.queue import QueuePlace

    return QueuePlace(position=1, length=1, eta=estimate.start, eta_basis=estimate.basis)


def test_windows_in_progress_cancelled_or_on_other_types_do_not_block(tenant, gpu_types):
    window(hours(1), hours(3), 8, gpu_type=None, state=MaintenanceWindow.State.CANCELLED,
           cancelled_at=NOW)
    window(NOW - dt.timedelta(hours=1), hours(2), 8, state=MaintenanceWindow.State.ACTIVE,
           cordoned_at=NOW - dt.timedelta(hours=1))  # its nodes are out of the pool already
    MaintenanceWindow.objects.create(start=hours(1), end=hours(3), reason="v100 swap",
                                     affected={"gpu-v100-0": {"gpu_type": "v100", "gpus": 8}})
    assert queue_blocks(gpu_types["a100"], NOW) == []


def test_other_tenants_reservations_are_blocks_for_the_others(tenant, gpu_types):
    other = Tenant.objects.create(keystone_project_id="project-nlp", name="nlp-lab",
                                  namespace="gp-nlp-lab", state="provisioned")
    Reservation.objects.create(tenant=other, gpu_type=gpu_types["a100"], count=6,
                               start=hours(1), end=hours(3), note="course")
    blocks = queue_blocks(gpu_types["a100"], NOW)
    assert blocks == [Block(hours(1), hours(3), 6, other.pk, RESERVATION)]
    job = make_workload(tenant, "ann", name="train", kind="batch", gpu_count=4,
                        state=Workload.State.QUEUED, max_runtime_minutes=120)
    assert estimates(gpu_types["a100"], capacity=8, now=NOW)[job.pk].start == hours(3)
    assert MAINTENANCE not in estimates(gpu_types["a100"], capacity=8, now=NOW)[job.pk].basis


def test_the_api_answers_the_pages_words_for_the_gpus_and_the_place(tenant, gpu_types):
    """The workload's API answer carries the texts the pages show (Workload.gpus_text,
    workloads.queue.queue_text), so that gpuctl prints them rather than composing its own."""
    from workloads.api.serializers import WorkloadSerializer

    job = make_workload(tenant, "ann", name="train", kind="batch", gpu_count=4, nodes=2,
                        state=Workload.State.QUEUED, max_runtime_minutes=120)
    place = _place(estimates(gpu_types["a100"], capacity=8, now=NOW)[job.pk])
    data = WorkloadSerializer(job, context={"queue_places": {job.pk: place}}).data
    assert data["gpus"] == job.gpus_text == "2 nodes × 4× a100 (8 GPUs)"
    assert data["queue_text"] == queue_text(job, place)
    assert data["queue_text"].startswith("queued — position 1 of 1 for a100")
    job.state = Workload.State.RUNNING
    assert WorkloadSerializer(job).data["queue_text"] is None
