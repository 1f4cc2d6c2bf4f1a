"""The calendar's arithmetic, pure (no database, no cluster): intervals of GPUs over time.

A reservation occurrence books `gpus`; a maintenance window takes `gpus` (those of its nodes)
out of the type's capacity. What is left for reservations at an instant is the capacity less
the windows then; a new booking fits when, at every instant of it, the bookings then plus it do
not exceed what is left.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence


@dataclasses.dataclass(frozen=True)
class Interval:
    start: dt.datetime
    end: dt.datetime
    gpus: int
    label: str = ""  # what it is, in words ("reservation #3", "maintenance #2: driver update")

    def overlaps(self, start: dt.datetime, end: dt.datetime) -> bool:
        return self.start < end and self.end > start


@dataclasses.dataclass(frozen=True)
class Segment:
    """A stretch of time in which nothing changes: the GPUs booked and down then."""

    start: dt.datetime
    end: dt.datetime
    booked: int
    down: int
    labels: tuple[str, ...] = ()

    def left(self, capacity: int) -> int:
        """What a further reservation could still book then."""
        return capacity - self.down - self.booked


def segments(start: dt.datetime, end: dt.datetime, booked: Iterable[Interval],
             down: Iterable[Interval] = ()) -> list[Segment]:
    """[start, end) cut where a booking or a window begins or ends, with the sums in each: one
    sweep over the sorted begin and end points (a year of weekly bookings is thousands)."""
    # (when, order, kind, interval index): ends sort before begins at the same instant
    events: list[tuple[dt.datetime, int, int, int]] = []
    intervals: list[tuple[int, Interval]] = []
    for kind, group in ((0, booked), (1, down)):
        for interval in group:
            if interval.overlaps(start, end):
                index = len(intervals)
                intervals.append((kind, interval))
                events.append((max(interval.start, start), 1, kind, index))
                events.append((min(interval.end, end), 0, kind, index))
    events.sort(key=lambda e: (e[0], e[1]))
    sums = [0, 0]
    active: dict[int, None] = {}  # insertion-ordered: the labels in order of beginning
    out: list[Segment] = []
    clock = start
    position = 0
    while clock < end:
        while position < len(events) and events[position][0] <= clock:
            _, begins, kind, index = events[position]
            gpus = intervals[index][1].gpus
            sums[kind] += gpus if begins else -gpus
            if begins:
                active[index] = None
            else:
                active.pop(index, None)
            position += 1
        following = events[position][0] if position < len(events) else end
        labels = tuple(intervals[i][1].label for i in sorted(active, key=lambda i: -intervals[i][0])
                       if intervals[i][1].label)
        out.append(Segment(clock, min(following, end), sums[0], sums[1], labels))
        clock = following
    return out


@dataclasses.dataclass(frozen=True)
class Overbooking:
    """Why a booking does not fit: the first stretch where it does not."""

    segment: Segment
    capacity: int
    wanted: int

    def text(self, slug: str) -> str:
        seg = self.segment
        parts = [f"{seg.booked} reserved"] if seg.booked else []
        if seg.down:
            parts.append(f"{seg.down} in maintenance")
        taken = f" ({', '.join(parts)})" if parts else ""
        return (f"From {seg.start:%Y-%m-%d %H:%M} to {seg.end:%Y-%m-%d %H:%M} UTC the cluster has "
                f"{max(seg.left(self.capacity), 0)} of its {self.capacity} {slug} GPUs left to "
                f"book{taken}; {self.wanted} do not fit.")


def overbooking(capacity: int, wanted: Sequence[Interval], booked: Iterable[Interval],
                down: Iterable[Interval] = ()) -> Overbooking | None:
    """The first stretch of any of the `wanted` occurrences where it does not fit beside the
    other bookings and windows; None: it fits everywhere."""
    booked, down = list(booked), list(down)
    for occurrence in wanted:
        for seg in segments(occurrence.start, occurrence.end, booked, down):
            if seg.booked + occurrence.gpus > capacity - seg.down:
                return Overbooking(seg, capacity, occurrence.gpus)
    return None


def gpu_hours(intervals: Iterable[Interval]) -> float:
    return sum(i.gpus * (i.end - i.start).total_seconds() / 3600 for i in intervals)


def crosses(start: dt.datetime, seconds: float | None, window: Interval) -> bool:
    """Whether a run from `start` lasting up to `seconds` (None: no limit) is still running
    when the window begins, and began before it ends."""
    if start >= window.end:
        return False
    if seconds is None:
        return True
    return start + dt.timedelta(seconds=seconds) > window.start
