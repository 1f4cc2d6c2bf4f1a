"""Rollups: allocated GPU-seconds from the workload's times, used GPU-seconds from samples;
duplicates, re-runs and clock skew never double-count; retention."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from tests.support.database import demo_shared_gpu_types
from usage.models import GpuSample, GpuUsageRollup
from usage.services import samples_insert, usage_prune, usage_rollup
from usage.tasks import usage_rollup_task

from .conftest import T0, make_workload, sample_row

pytestmark = pytest.mark.django_db

S = dt.timedelta(seconds=1)
MINUTE, HOUR = GpuUsageRollup.Granularity.MINUTE, GpuUsageRollup.Granularity.HOUR


@pytest.fixture(autouse=True)
def _interval(settings):
    settings.PORTAL_USAGE_SCRAPE_INTERVAL = 15.0  # one sample counts for at most 22.5 s


@pytest.fixture
def finished(tenants, users, gpu_types):
    """Two GPUs from 10:00:30 to 10:03:00; both at 50 % every 15 s from 10:00:45 to 10:03:00.
    A sample describes the time since the previous one (at most 22.5 s), within the run."""
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=2,
                             started_at=T0 + 30 * S, finished_at=T0 + 180 * S)
    rows = [sample_row(T0 + t * S, workload, uuid=uuid, util=50.0)
            for uuid in ("GPU-a", "GPU-b") for t in range(45, 181, 15)]
    assert samples_insert(rows=rows) == 20
    return workload


def minutes(workload) -> dict[int, GpuUsageRollup]:
    return {r.bucket_start.minute: r for r in GpuUsageRollup.objects.filter(
        workload=workload, granularity=MINUTE)}


def hour(workload) -> GpuUsageRollup:
    return GpuUsageRollup.objects.get(workload=workload, granularity=HOUR)


def rollup() -> None:
    usage_rollup(since=T0, until=T0 + dt.timedelta(hours=1), now=T0 + dt.timedelta(days=1))


def test_allocated_from_the_run_and_used_from_the_samples(finished):
    rollup()
    by_minute = minutes(finished)
    assert sorted(by_minute) == [0, 1, 2]  # nothing after the finish
    assert [by_minute[m].gpu_seconds_allocated for m in (0, 1, 2)] == [60.0, 120.0, 120.0]
    # 10 samples per GPU × 15 s × 50 %, two GPUs
    assert sum(r.gpu_seconds_used for r in by_minute.values()) == pytest.approx(150.0)
    total = hour(finished)
    assert total.gpu_seconds_allocated == 300.0
    assert total.gpu_seconds_used == pytest.approx(150.0)
    assert total.samples == 20 and total.util_avg == 50.0 and total.util_max == 50.0
    assert total.tenant_id == finished.tenant_id and total.user_id == finished.owner_id
    assert total.gpu_type.slug == "a100" and total.gpu_count == 2


def test_running_the_rollup_again_changes_nothing(finished):
    rollup()
    before = list(GpuUsageRollup.objects.order_by("pk").values(
        "pk", "granularity", "bucket_start", "gpu_seconds_allocated", "gpu_seconds_used",
        "samples"))
    rollup()
    usage_rollup(since=T0 + 90 * S, until=T0 + 150 * S, now=T0 + dt.timedelta(days=1))
    after = list(GpuUsageRollup.objects.order_by("pk").values(
        "pk", "granularity", "bucket_start", "gpu_seconds_allocated", "gpu_seconds_used",
        "samples"))
    assert after == before


def test_duplicate_samples_do_not_double_count(finished):
    rows = [sample_row(T0 + t * S, finished, uuid=uuid, util=50.0)
            for uuid in ("GPU-a", "GPU-b") for t in range(45, 181, 15)]
    assert samples_insert(rows=rows) == 0  # the same batch again: dropped at insert
    # a second exporter (or a retried scrape) one second later reports the same GPUs
    near = [sample_row(T0 + (t + 1) * S, finished, uuid=uuid, util=50.0)
            for uuid in ("GPU-a", "GPU-b") for t in range(45, 181, 15)]
    assert samples_insert(rows=near) == 20
    rollup()
    assert hour(finished).gpu_seconds_used == pytest.approx(150.0)
    assert hour(finished).gpu_seconds_allocated == 300.0


def test_samples_stamped_outside_the_run_add_nothing(finished):
    """Clock skew: an exporter (or Prometheus) whose clock runs ten minutes ahead."""
    skewed = [sample_row(T0 + (600 + t) * S, finished, uuid="GPU-a", util=100.0)
              for t in range(0, 300, 15)]
    samples_insert(rows=skewed)
    rollup()
    total = hour(finished)
    assert total.gpu_seconds_allocated == 300.0
    assert total.gpu_seconds_used == pytest.approx(150.0)  # the skewed ones: no allocation there
    assert all(r.gpu_seconds_used <= r.gpu_seconds_allocated
               for r in GpuUsageRollup.objects.all())


def test_a_gap_in_the_samples_counts_at_most_one_capped_interval(tenants, users, gpu_types):
    workload = make_workload(tenants["alpha"], users["ann"], started_at=T0,
                             finished_at=T0 + dt.timedelta(minutes=30))
    samples_insert(rows=[sample_row(T0 + 15 * S, workload, util=100.0),
                         sample_row(T0 + 615 * S, workload, util=100.0)])  # 10 minutes later
    rollup()
    assert hour(workload).gpu_seconds_used == pytest.approx(15.0 + 22.5)
    assert hour(workload).gpu_seconds_allocated == 1800.0


def test_a_gpu_that_changes_hands_starts_afresh(tenants, users, gpu_types):
    first = make_workload(tenants["alpha"], users["ann"], started_at=T0,
                          finished_at=T0 + 60 * S, name="first")
    second = make_workload(tenants["beta"], users["bob"], started_at=T0 + 120 * S,
                           finished_at=T0 + 240 * S, name="second")
    samples_insert(rows=[sample_row(T0 + 60 * S, first, util=100.0),
                         sample_row(T0 + 135 * S, second, util=100.0)])
    rollup()
    assert hour(first).gpu_seconds_used == pytest.approx(22.5)  # a first sample: one cap
    assert hour(second).gpu_seconds_used == pytest.approx(15.0)  # not before its own start


def test_a_running_workload_is_allocated_up_to_now(tenants, users, gpu_types):
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=4, started_at=T0)
    usage_rollup(since=T0, until=T0 + 150 * S, now=T0 + 150 * S)
    assert hour(workload).gpu_seconds_allocated == 4 * 150.0
    # later: its finish time is known and earlier rows are recomputed (and extra ones go)
    usage_rollup(since=T0, until=T0 + 300 * S, now=T0 + 300 * S)
    assert hour(workload).gpu_seconds_allocated == 4 * 300.0
    workload.finished_at = T0 + 90 * S
    workload.save(update_fields=["finished_at"])
    usage_rollup(since=T0, until=T0 + 300 * S, now=T0 + 300 * S)
    assert sorted(minutes(workload)) == [0, 1]
    assert hour(workload).gpu_seconds_allocated == 4 * 90.0


def test_hours_are_the_sums_of_their_minutes(tenants, users, gpu_types):
    workload = make_workload(tenants["alpha"], users["ann"], started_at=T0 + 50 * 60 * S,
                             finished_at=T0 + 70 * 60 * S)
    samples_insert(rows=[sample_row(T0 + t * S, workload, util=20.0 if t <= 3600 else 80.0)
                         for t in range(50 * 60 + 15, 70 * 60 + 1, 15)])
    usage_rollup(since=T0, until=T0 + dt.timedelta(hours=2), now=T0 + dt.timedelta(days=1))
    hours = {r.bucket_start.hour: r for r in GpuUsageRollup.objects.filter(granularity=HOUR)}
    assert sorted(hours) == [10, 11]
    assert hours[10].gpu_seconds_allocated == 600.0 and hours[11].gpu_seconds_allocated == 600.0
    assert hours[10].gpu_seconds_used == pytest.approx(0.2 * 600)
    assert hours[11].gpu_seconds_used == pytest.approx(0.8 * 600)
    assert hours[10].util_avg == pytest.approx(20.0) and hours[11].util_max == 80.0


def test_retention_keeps_raw_samples_48_hours_and_hour_rollups_for_good(finished, settings):
    rollup()
    now = T0 + dt.timedelta(days=40)
    recent = sample_row(now - dt.timedelta(hours=47), None, uuid="GPU-free")
    samples_insert(rows=[recent])
    report = usage_prune(now=now)
    assert report.samples == 20 and report.minute_rollups == 3
    assert list(GpuSample.objects.values_list("uuid", flat=True)) == ["GPU-free"]
    assert GpuUsageRollup.objects.filter(granularity=HOUR).count() == 1
    assert not GpuUsageRollup.objects.filter(granularity=MINUTE).exists()
    settings.PORTAL_USAGE_RAW_RETENTION_HOURS = 1
    assert usage_prune(now=now).samples == 1


def test_the_rollup_task_rolls_up_the_last_minutes(tenants, users, gpu_types):
    workload = make_workload(tenants["alpha"], users["ann"],
                             started_at=timezone.now() - dt.timedelta(minutes=5))
    usage_rollup_task()
    # one hour bucket, or two when the last five minutes straddle the hour
    rows = list(GpuUsageRollup.objects.filter(workload=workload, granularity=HOUR,
                                              bucket_start__lte=timezone.now()))
    assert 1 <= len(rows) <= 2
    assert sum(row.gpu_seconds_allocated for row in rows) > 0


def test_a_shared_gpus_units_count_their_part_of_a_gpu(tenants, users, gpu_types):
    # 2 quarter-T4s (time-sliced) for 2.5 minutes at 100 %: a quarter of the GPU-seconds each
    demo_shared_gpu_types(gpu_types)
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=2, gpu_type="t4-shared",
                             started_at=T0 + 30 * S, finished_at=T0 + 180 * S)
    samples_insert(rows=[sample_row(T0 + t * S, workload, uuid=uuid, util=100.0)
                         for uuid in ("GPU-t::0", "GPU-t::1") for t in range(45, 181, 15)])
    rollup()
    total = hour(workload)
    assert total.gpu_count == 2  # units
    assert total.gpu_seconds_allocated == pytest.approx(2 * 150.0 / 4)
    assert total.gpu_seconds_used == pytest.approx(2 * 150.0 / 4)


def test_a_dra_types_devices_count_as_units_times_their_fraction(tenants, users, gpu_types):
    # claimed through DRA: 2 whole A100s (gpu.nvidia.com), then 3 MIG devices (mig.nvidia.com,
    # a seventh each), 2.5 minutes each, counted as any other type's units
    from catalogue.models import GpuType
    from tests.support.database import dra_gpu_type

    dra_gpu_type()
    GpuType.objects.create(slug="a100-mig-dra", name="A100 MIG 1g.10gb (DRA)", memory_gb=10,
                           node_selector={"gputype": "a100-dra"}, sharing="dra",
                           device_class="mig.nvidia.com", fraction_numerator=1,
                           fraction_denominator=7)
    whole = make_workload(tenants["alpha"], users["ann"], gpu_count=2, gpu_type="a100-dra",
                          started_at=T0 + 30 * S, finished_at=T0 + 180 * S)
    sliced = make_workload(tenants["alpha"], users["ann"], gpu_count=3,
                           gpu_type="a100-mig-dra", started_at=T0 + 30 * S,
                           finished_at=T0 + 180 * S)
    rollup()
    assert hour(whole).gpu_seconds_allocated == pytest.approx(2 * 150.0)
    assert hour(sliced).gpu_seconds_allocated == pytest.approx(3 * 150.0 / 7)
