"""The start estimate of queued workloads (workloads/eta.py): pure, no database."""

from __future__ import annotations

import datetime as dt

from workloads.eta import HISTORY, LIMIT, NEVER, NO_LIMIT, Holder, Waiter, estimate_starts

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def minutes(n: float) -> dt.datetime:
    return NOW + dt.timedelta(minutes=n)


def test_free_gpus_start_now():
    got = estimate_starts(now=NOW, capacity=4, reach={}, running=[Holder("a", 2, minutes(30))],
                          queue=[Waiter("w", "b", 2, 600)])
    assert got["w"].start == NOW and got["w"].basis == "GPUs are free now"


def test_a_waiter_starts_when_enough_running_workloads_end():
    running = [Holder("a", 2, minutes(50)), Holder("a", 1, minutes(10)),
               Holder("b", 1, minutes(20))]
    got = estimate_starts(now=NOW, capacity=4, reach={}, running=running,
                          queue=[Waiter("w", "b", 2, 600)])
    # 1 GPU back at 10 min, a second at 20 min
    assert got["w"].start == minutes(20)
    assert got["w"].basis == "from maximum runtimes"


def test_the_queue_is_played_in_order_and_each_waiter_holds_its_gpus():
    running = [Holder("a", 4, minutes(30))]
    queue = [Waiter("first", "a", 4, 40 * 60), Waiter("second", "b", 2, 600, HISTORY)]
    got = estimate_starts(now=NOW, capacity=4, reach={}, running=running, queue=queue)
    assert got["first"].start == minutes(30)
    assert got["second"].start == minutes(70)  # behind "first", which ends at 30 + 40
    assert got["second"].basis == "from maximum runtimes"


def test_a_tenants_reach_holds_it_back_even_with_free_gpus():
    running = [Holder("a", 2, minutes(15)), Holder("b", 1, minutes(45))]
    got = estimate_starts(now=NOW, capacity=8, reach={"a": 2}, running=running,
                          queue=[Waiter("w", "a", 1, 60)])
    assert got["w"].start == minutes(15)  # a's own workload must end first


def test_history_is_named_in_the_basis():
    running = [Holder("a", 1, minutes(5), HISTORY)]
    got = estimate_starts(now=NOW, capacity=1, reach={}, running=running,
                          queue=[Waiter("w", "b", 1, 60)])
    assert got["w"].start == minutes(5)
    assert got["w"].basis == "from the typical duration of similar workloads"


def test_an_overdue_end_counts_as_now():
    got = estimate_starts(now=NOW, capacity=1, reach={}, running=[Holder("a", 1, minutes(-5))],
                          queue=[Waiter("w", "b", 1, 60)])
    assert got["w"].start == NOW


def test_no_estimate_behind_workloads_without_a_time_limit():
    running = [Holder("a", 2, None, "unknown"), Holder("a", 1, minutes(10))]
    queue = [Waiter("fits", "b", 1, 60), Waiter("stuck", "b", 2, 60), Waiter("behind", "c", 1, 60)]
    got = estimate_starts(now=NOW, capacity=3, reach={}, running=running, queue=queue)
    assert got["fits"].start == minutes(10)
    assert (got["stuck"].start, got["stuck"].basis) == (None, NO_LIMIT)
    # strict order: nothing behind an undatable waiter is dated
    assert (got["behind"].start, got["behind"].basis) == (None, NO_LIMIT)


def test_a_waiter_without_a_time_limit_leaves_the_ones_behind_it_undated():
    queue = [Waiter("open ended", "a", 1, None, "unknown"), Waiter("next", "a", 1, 60)]
    got = estimate_starts(now=NOW, capacity=1, reach={}, running=[], queue=queue)
    assert got["open ended"].start == NOW
    assert got["next"].start is None and got["next"].basis == NO_LIMIT


def test_more_than_the_pool_or_the_reach_is_never():
    queue = [Waiter("huge", "a", 9, 60), Waiter("over reach", "b", 3, 60),
             Waiter("fine", "c", 1, 60, LIMIT)]
    got = estimate_starts(now=NOW, capacity=8, reach={"b": 2}, running=[], queue=queue)
    assert got["huge"].basis == NEVER and got["over reach"].basis == NEVER
    assert got["fine"].start == NOW  # a waiter that can never start blocks no one
