"""The calendar's arithmetic (calendars/timeline.py) and a reservation's occurrences: pure, no
database."""

from __future__ import annotations

import datetime as dt
import random

from calendars.models import Reservation
from calendars.timeline import Interval, crosses, gpu_hours, overbooking, segments

T = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)  # a Monday


def h(hours: float) -> dt.datetime:
    return T + dt.timedelta(hours=hours)


def test_segments_cut_where_anything_begins_or_ends():
    booked = [Interval(h(1), h(5), 4, "r1"), Interval(h(3), h(8), 2, "r2")]
    down = [Interval(h(4), h(6), 8, "m1")]
    got = [(s.start, s.end, s.booked, s.down, s.labels) for s in segments(h(0), h(10), booked, down)]
    assert got == [(h(0), h(1), 0, 0, ()), (h(1), h(3), 4, 0, ("r1",)),
                   (h(3), h(4), 6, 0, ("r1", "r2")), (h(4), h(5), 6, 8, ("m1", "r1", "r2")),
                   (h(5), h(6), 2, 8, ("m1", "r2")), (h(6), h(8), 2, 0, ("r2",)),
                   (h(8), h(10), 0, 0, ())]


def test_segments_agree_with_summing_every_interval_at_each_instant():
    rng = random.Random(7)
    for _ in range(200):
        intervals = []
        for _ in range(rng.randint(0, 9)):
            start = h(rng.randint(-4, 30))
            intervals.append(Interval(start, start + dt.timedelta(hours=rng.randint(1, 9)),
                                      rng.randint(1, 6)))
        for seg in segments(h(0), h(24), intervals):
            middle = seg.start + (seg.end - seg.start) / 2
            assert seg.booked == sum(i.gpus for i in intervals if i.start <= middle < i.end)


def test_overbooking_names_the_first_stretch_that_does_not_fit():
    booked = [Interval(h(0), h(4), 10)]
    down = [Interval(h(2), h(3), 8)]
    assert overbooking(16, [Interval(h(4), h(6), 16)], booked, down) is None
    conflict = overbooking(16, [Interval(h(1), h(6), 1)], booked, down)
    assert conflict is not None and (conflict.segment.start, conflict.segment.end) == (h(2), h(3))
    assert conflict.text("a100") == ("From 2026-12-07 11:00 to 2026-12-07 12:00 UTC the cluster "
                                     "has 0 of its 16 a100 GPUs left to book (10 reserved, 8 in "
                                     "maintenance); 1 do not fit.")
    assert overbooking(16, [Interval(h(1), h(2), 6)], booked, down) is None
    assert overbooking(16, [Interval(h(1), h(2), 7)], booked, down) is not None


def test_a_run_crosses_a_window_when_it_is_still_running_at_its_start():
    window = Interval(h(5), h(7), 8)
    assert crosses(h(0), None, window)  # no limit
    assert crosses(h(4), 3600 * 2, window)
    assert not crosses(h(0), 3600 * 5, window)  # ends as it begins
    assert not crosses(h(7), None, window)  # starts after it
    assert crosses(h(6), 60, window)  # starts inside it
    assert gpu_hours([Interval(h(0), h(2), 4), Interval(h(0), h(0.5), 2)]) == 9.0


def test_weekly_occurrences_stop_before_until():
    weekly = Reservation(start=h(0), end=h(8), recurrence="weekly", until=T + dt.timedelta(days=21))
    got = list(weekly.occurrences(T - dt.timedelta(days=1), T + dt.timedelta(days=60)))
    assert [s for s, _ in got] == [T + dt.timedelta(days=7 * k) for k in range(3)]
    assert all(e - s == dt.timedelta(hours=8) for s, e in got)
    assert weekly.last_end == T + dt.timedelta(days=14, hours=8)
    # from the middle of the second occurrence: it and the third
    later = list(weekly.occurrences(T + dt.timedelta(days=7, hours=3), T + dt.timedelta(days=60)))
    assert [s for s, _ in later] == [T + dt.timedelta(days=7), T + dt.timedelta(days=14)]
    once = Reservation(start=h(0), end=h(8))
    assert list(once.occurrences(h(8), h(20))) == []
    assert list(once.occurrences(h(7), h(20))) == [(h(0), h(8))]
