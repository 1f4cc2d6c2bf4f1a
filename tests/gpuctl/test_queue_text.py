"""How gpuctl says where a queued workload stands (pure)."""

from __future__ import annotations

import datetime as dt

from gpuctl.commands.workload import queue_text, state_text

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def test_position_and_estimate():
    workload = {"state": "queued", "queue_position": 3, "queue_length": 7, "gpu_type": "a100",
                "eta": "2026-11-23T12:40:00Z", "eta_basis": "from maximum runtimes"}
    assert queue_text(workload, NOW) == "queued — position 3 of 7 for a100, about 40 min"
    assert state_text(workload) == "queued 3/7"


def test_no_estimate_says_why():
    workload = {"state": "queued", "queue_position": 1, "queue_length": 1, "gpu_type": "t4",
                "eta": None, "eta_basis": "no estimate: the workloads ahead have no time limit"}
    assert queue_text(workload, NOW) == ("queued — position 1 of 1 for t4; no estimate: the "
                                         "workloads ahead have no time limit")


def test_long_waits_in_hours_and_due_ones_now():
    workload = {"state": "queued", "queue_position": None, "gpu_type": "a100",
                "eta": "2026-11-23T15:00:00+00:00"}
    assert queue_text(workload, NOW) == "queued, about 3.0 h"
    assert state_text(workload) == "queued"
    assert queue_text({**workload, "eta": "2026-11-23T12:00:10Z"}, NOW) == "queued, starting now"
