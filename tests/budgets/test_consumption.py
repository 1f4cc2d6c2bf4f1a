"""Consumption: weighted GPU-hours of running and finished workloads of several GPU types in
the current period (clipped to it), per user, the burn rate, the forecast and the reset."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext

from budgets.periods import period_bounds, period_label
from budgets.selectors import budget_status, burn_down, consumption, top_users
from tests.budgets.conftest import NOW, budget, run
from tests.support.database import demo_shared_gpu_types

pytestmark = pytest.mark.django_db

UTC = dt.UTC
WEIGHTS = {"a100": 1.0, "t4": 0.25, "v100": 0.5}


@pytest.fixture
def november(tenants, users, clock):
    """vision-lab's month: 8 + 2 + 10 weighted GPU-hours, 1 weighted GPU running now."""
    vision, nlp = tenants["vision-lab"], tenants["nlp-lab"]
    ann, bob = users["ann"], users["bob"]
    # started last month: only November's 4 hours count (× 2 a100)
    run(vision, ann, start=dt.datetime(2026, 10, 31, 22, tzinfo=UTC),
        end=dt.datetime(2026, 11, 1, 4, tzinfo=UTC), gpus=2)
    # running for 2 hours on 4 t4 (weight 0.25)
    run(vision, ann, start=NOW - dt.timedelta(hours=2), gpu_type="t4", gpus=4)
    # a group: 2 nodes × 2 v100 (weight 0.5) for 5 hours
    run(vision, bob, start=dt.datetime(2026, 11, 10, tzinfo=UTC),
        end=dt.datetime(2026, 11, 10, 5, tzinfo=UTC), gpu_type="v100", gpus=2, nodes=2)
    # none of these count: October's, another tenant's, one that never started
    run(vision, bob, start=dt.datetime(2026, 10, 2, tzinfo=UTC),
        end=dt.datetime(2026, 10, 3, tzinfo=UTC), gpus=8)
    run(nlp, bob, start=dt.datetime(2026, 11, 2, tzinfo=UTC), gpus=8)
    run(vision, bob, start=None, gpus=8)
    return vision


def test_weighted_gpu_hours_of_running_and_finished_workloads_in_the_period(november, users):
    counted = consumption(november, weights=WEIGHTS, start=dt.datetime(2026, 11, 1, tzinfo=UTC),
                          now=NOW, user=users["ann"])
    assert counted.used == pytest.approx(8 + 2 + 10)
    assert counted.user_used == pytest.approx(8 + 2)
    assert counted.rate == pytest.approx(4 * 0.25)
    # unweighted, every GPU-hour counts 1
    plain = consumption(november, weights={}, start=dt.datetime(2026, 11, 1, tzinfo=UTC), now=NOW)
    assert plain.used == pytest.approx(8 + 8 + 20)


def test_consumption_is_one_query(november):
    with CaptureQueriesContext(connection) as queries:
        consumption(november, weights=WEIGHTS, start=dt.datetime(2026, 11, 1, tzinfo=UTC),
                    now=NOW)
    assert len(queries) == 1


def test_the_budgets_standing_forecast_reset_and_top_users(november):
    budget(november, 30, weights=WEIGHTS)
    status = budget_status(november)
    assert status.period_start == dt.datetime(2026, 11, 1, tzinfo=UTC)
    assert status.resets_at == dt.datetime(2026, 12, 1, tzinfo=UTC)
    assert (status.used, status.remaining) == (pytest.approx(20), pytest.approx(10))
    assert status.percent == pytest.approx(66.67, abs=0.01)
    assert not status.exhausted
    # 10 left at 1 weighted GPU: ten hours from now
    assert status.forecast_exhausted_at == NOW + dt.timedelta(hours=10)
    assert status.label == "November 2026"
    assert top_users(status) == [
        {"user_id": "ann", "user": "ann", "domain": "Default", "gpu_hours": 10.0, "cap": None},
        {"user_id": "bob", "user": "bob", "domain": "Default", "gpu_hours": 10.0, "cap": None}]


def test_no_forecast_when_the_reset_comes_first_or_it_is_used_up(november):
    row = budget(november, 1000, weights=WEIGHTS)
    assert budget_status(november).forecast_exhausted_at is None  # 980 h at 1/h: after Dec 1
    row.gpu_hours = 15
    row.save()
    status = budget_status(november)
    assert status.exhausted and status.remaining == 0 and status.forecast_exhausted_at is None


def test_the_burn_down_series_per_day(november):
    budget(november, 40, weights=WEIGHTS)
    series = burn_down(budget_status(november))
    assert len(series["x"]) == 30  # the days of November
    assert series["x"][0] == dt.datetime(2026, 11, 2, tzinfo=UTC).timestamp()
    assert series["used"][0] == pytest.approx(8)  # Nov 1: the run from October
    assert series["used"][9] == pytest.approx(18)  # Nov 10: and the group's 10
    assert series["used"][19] == pytest.approx(20)  # today, until now
    assert series["used"][20] is None and series["forecast"][18] is None
    assert series["forecast"][19] == pytest.approx(20 + 12)  # by midnight at 1 per hour
    assert series["forecast"][20] == pytest.approx(40)  # 56 by then: capped at the budget
    assert series["forecast"][-1] == pytest.approx(40)
    assert series["budget"] == 40.0


@pytest.mark.parametrize(("period", "start", "end", "label"), [
    ("month", dt.datetime(2026, 11, 1), dt.datetime(2026, 12, 1), "November 2026"),
    ("quarter", dt.datetime(2026, 10, 1), dt.datetime(2027, 1, 1), "Q4 2026"),
    ("year", dt.datetime(2026, 1, 1), dt.datetime(2027, 1, 1), "2026"),
])
def test_periods_start_at_midnight_in_the_portals_time_zone(settings, period, start, end, label):
    settings.TIME_ZONE = "Europe/Berlin"
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    # 23:30 UTC on Nov 30 is already December 1 in Berlin
    at = dt.datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    if period == "month":
        start, end, label = dt.datetime(2026, 12, 1), dt.datetime(2027, 1, 1), "December 2026"
    bounds = period_bounds(period, at)
    assert bounds == (start.replace(tzinfo=berlin), end.replace(tzinfo=berlin))
    assert period_label(period, bounds[0]) == label


def test_the_settled_period_plus_what_ran_since_is_the_whole_count(november, users, clock):
    """The periodic check settles the period until 5 minutes ago; a launch's check adds the
    runs since (running ones, ones that finished since): the same figure as counting all."""
    from budgets.services import budget_settle

    row = budget(november, 30, weights=WEIGHTS)
    budget_settle(budget=row, now=NOW)
    row.refresh_from_db()
    assert row.settled_until == NOW - dt.timedelta(minutes=5)
    assert row.settled_used == pytest.approx(20 - 5 / 60)  # the t4s' last 5 minutes not yet
    # later: the t4s finish, another run starts and ends, all after the settlement
    clock.move_to(NOW + dt.timedelta(hours=1))
    later = NOW + dt.timedelta(hours=1)
    november.workloads.filter(finished_at__isnull=True, started_at__isnull=False).update(
        finished_at=NOW + dt.timedelta(minutes=30), state="succeeded")
    run(november, users["bob"], start=NOW, end=NOW + dt.timedelta(minutes=45), gpus=4)
    settled = budget_status(november, budget=row, user=users["bob"])
    whole = consumption(november, weights=WEIGHTS, start=settled.period_start, now=later,
                        user=users["bob"])
    assert settled.used == pytest.approx(whole.used) == pytest.approx(20 + 0.5 + 3)
    assert settled.user_used == pytest.approx(whole.user_used) == pytest.approx(10 + 3)
    assert settled.rate == whole.rate == 0
    # a changed budget drops its settlement (weights may differ): counted whole again
    from budgets.services import budget_set

    with TestCase.captureOnCommitCallbacks(execute=False):
        changed = budget_set(tenant=november, acting_user=None,
                             fields={"gpu_hours": 30, "weights": {}})
    assert changed.settled_until is None
    assert budget_status(november).used == pytest.approx(8 + 10 + 20 + 3)  # unweighted


def test_a_preempted_run_back_in_the_queue_adds_nothing_to_the_burn_rate(november, users):
    """Kueue took its GPUs back: it waits queued again with its first start and no finish; it
    holds no GPUs, so the forecast does not count it (its past run still counts as used)."""
    preempted = run(november, users["bob"], start=NOW - dt.timedelta(hours=1), gpus=8)
    preempted.state = "queued"
    preempted.save(update_fields=["state"])
    counted = consumption(november, weights=WEIGHTS, start=dt.datetime(2026, 11, 1, tzinfo=UTC),
                          now=NOW)
    assert counted.rate == pytest.approx(4 * 0.25)  # the t4 run alone


def test_a_shared_gpus_units_cost_their_part_of_a_gpu_hour(tenants, users, gpu_types, clock):
    # four quarter-T4s (time-sliced) for 2 hours and 7 A100 slices (MIG 1g.10gb) for 1 hour:
    # 2 + 1 GPU-hours, and the burn rate of the running quarters is 1 GPU
    demo_shared_gpu_types(gpu_types)
    vision, ann = tenants["vision-lab"], users["ann"]
    run(vision, ann, start=NOW - dt.timedelta(hours=2), gpu_type="t4-shared", gpus=4)
    run(vision, ann, start=NOW - dt.timedelta(hours=3), end=NOW - dt.timedelta(hours=2),
        gpu_type="a100-1g-10gb", gpus=7)
    counted = consumption(vision, weights={}, start=dt.datetime(2026, 11, 1, tzinfo=UTC),
                          now=NOW, user=ann)
    assert counted.used == pytest.approx(2 + 1)
    assert counted.rate == pytest.approx(1)
    budget(vision, 10)
    assert top_users(budget_status(vision))[0]["gpu_hours"] == pytest.approx(3)
