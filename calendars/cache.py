"""The calendar as the launch check reads it, held in the process: the live maintenance windows
and, per GPU type, its live reservations (with what an occurrence and its text need) and their
released occurrences. Read again only when the calendar changed.

The launch page checks a launch at every keystroke, and each check read the same windows and
reservations again and computed the type's occurrences from them (a weekly reservation is one
row for a year of occurrences). What is held is keyed by the calendar's version
(models.CalendarVersion): a token that triggers in the database replace in the transaction of
every write of those rows (migration 0004), whoever writes them (the services, the beat, a
shell, a test's `.update()`) in whichever process. A check reads the token (one query); what is
held for it answers when it matches, else the calendar is read again (windows: one query; a
type's reservations and releases: two, on the first ask of the type) and held in its place.

- The token is read before the calendar: what is held is never older than its token (a write
  committed in between is read again at the next check, under its own token).
- A token is random and never comes back: what a transaction saw before it rolled back is never
  taken for a later state.
- What is held covers the week from the instant it was read for (`since` to `until`): every
  live window that ends after `since` (its end filtered at each check), each type's live
  reservations with an occurrence in that week (`selectors.live_reservations`). A check whose
  day ahead leaves the week, or of an earlier instant (a clock set back), reads the calendar
  again; what a check asks beyond the week (the first reservation of a year, for a launch with
  no maximum runtime, when none starts within the week) comes from the database. The number of
  rows read again after a write is the week's, not the year's bookings.
- Every check answers from what is held exactly as the database reads did: the same rows, the
  same occurrences computed by the same functions (selectors.spans_of, occurrences_cut).
- The held rows are shared between the threads of a process and never changed after they are
  read: a check only reads them.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import threading

from catalogue.models import GpuType
from catalogue.selectors import AHEAD as OUTLOOK_AHEAD
from core.registry import SharedReads

from .models import CalendarVersion, MaintenanceWindow, Reservation, ReservationOccurrence
from .selectors import (
    BRIEF_FIELDS,
    Occurrence,
    Released,
    live_reservations,
    live_windows,
    next_occurrence,
    occurrences_between,
    occurrences_cut,
    of_type,
    releases,
    spans_of,
)

# how far ahead the held reservations reach: a check looks a day ahead (OUTLOOK_AHEAD), so what
# is held serves the checks of the next six days; a year of one-off bookings is not read for it
HELD_AHEAD = dt.timedelta(days=7)


def calendar_token() -> str | None:
    """The calendar's version now (None: no row, until the next write)."""
    return CalendarVersion.objects.filter(pk=1).values_list("token", flat=True).first()


@dataclasses.dataclass(frozen=True)
class TypeBookings:
    """A GPU type's live reservations that may have an occurrence starting in [since, until)
    (or running at `since`): the one-off ones in order of start (then id), the weekly ones; and
    the releases of those occurrences."""

    one_offs: tuple[Reservation, ...]
    starts: tuple[dt.datetime, ...]  # the one-off ones' starts, for bisect
    weekly: tuple[Reservation, ...]
    released: Released


def _bookings_read(gpu_type: GpuType, since: dt.datetime, until: dt.datetime) -> TypeBookings:
    reservations = of_type(list(live_reservations(gpu_type, since, until).only(*BRIEF_FIELDS)),
                           gpu_type)
    one_offs = sorted((r for r in reservations if r.recurrence != Reservation.Recurrence.WEEKLY),
                      key=lambda r: (r.start, r.pk))
    released = releases(ReservationOccurrence.objects.filter(
        reservation__gpu_type=gpu_type, reservation__cancelled_at__isnull=True,
        start__lt=until, end__gt=since))
    return TypeBookings(
        one_offs=tuple(one_offs), starts=tuple(r.start for r in one_offs),
        weekly=tuple(r for r in reservations if r.recurrence == Reservation.Recurrence.WEEKLY),
        released=released)


class HeldCalendar:
    """The calendar as read under `token` for [since, until): every live window that ends
    after `since`, each type's reservations with an occurrence in that span."""

    def __init__(self, token: str | None, since: dt.datetime) -> None:
        self.token = token
        self.since = since
        self.until = since + HELD_AHEAD
        self.windows = live_windows(since)
        self._types: dict[int, TypeBookings] = {}
        self._lock = threading.Lock()

    def covers(self, token: str | None, at: dt.datetime) -> bool:
        """Whether it answers a check at `at` under `token`: its occurrences of the day."""
        return token == self.token and self.since <= at and at + OUTLOOK_AHEAD <= self.until

    def live_windows(self, now: dt.datetime) -> list[MaintenanceWindow]:
        """`selectors.live_windows(now)` (from the database before the span held)."""
        if now < self.since:
            return live_windows(now)
        return [window for window in self.windows if window.end > now]

    def bookings(self, gpu_type: GpuType) -> TypeBookings:
        """The type's, read on its first ask."""
        with self._lock:
            held = self._types.get(gpu_type.pk)
        if held is None:
            held = _bookings_read(gpu_type, self.since, self.until)
            with self._lock:
                held = self._types.setdefault(gpu_type.pk, held)
        return held

    def occurrences(self, gpu_type: GpuType, since: dt.datetime, until: dt.datetime
                    ) -> list[Occurrence]:
        """`selectors.occurrences_between(gpu_type, since, until)`: from the one-off
        reservations held that start before `until` and the weekly ones, within the span
        held (from the database beyond it)."""
        if not (self.since <= since and until <= self.until):
            return occurrences_between(gpu_type, since, until)
        held = self.bookings(gpu_type)
        before = held.one_offs[:bisect.bisect_left(held.starts, until)]
        return occurrences_cut(spans_of(before + held.weekly, since, until), held.released,
                               since)

    def next_occurrence(self, gpu_type: GpuType, after: dt.datetime, before: dt.datetime, *,
                        other_than_tenant: int | None = None) -> Occurrence | None:
        """`selectors.next_occurrence`: the first occurrence to start within the span held
        (the first one-off one in the held order, each weekly one's next occurrence: at most
        two computed per reservation), else the first after it, from the database."""
        if after < self.since:
            return next_occurrence(gpu_type, after, before, other_than_tenant=other_than_tenant)
        held = self.bookings(gpu_type)
        within = min(before, self.until)
        found: list[tuple[dt.datetime, int, dt.datetime, Reservation]] = []
        for reservation in held.one_offs[bisect.bisect_right(held.starts, after):]:
            if reservation.start >= within:
                break
            if reservation.tenant_id != other_than_tenant:
                found.append((reservation.start, reservation.pk, reservation.end, reservation))
                break
        for reservation in held.weekly:
            if reservation.tenant_id == other_than_tenant:
                continue
            for start, end in reservation.occurrences(after, within):
                if start > after:  # not the one running now
                    found.append((start, reservation.pk, end, reservation))
                    break
        if found:
            start, _, end, reservation = min(found, key=lambda f: (f[0], f[1]))
            return Occurrence(reservation, start, end)
        if before <= self.until:
            return None
        # none starts within the span held: the first to start from its end on
        return next_occurrence(gpu_type, self.until - dt.timedelta(microseconds=1), before,
                               other_than_tenant=other_than_tenant)


_held: list[HeldCalendar] = []  # the process's: the last read
_held_lock = threading.Lock()


def held_calendar(at: dt.datetime) -> HeldCalendar:
    """The calendar for checks at `at` and later: the one held when the token has not changed
    (one query), else read again and held."""
    token = calendar_token()
    with _held_lock:
        held = _held[0] if _held else None
    if held is not None and held.covers(token, at):
        return held
    held = HeldCalendar(token, at)
    with _held_lock:
        _held[:] = [held]
    return held


def shared_calendar(reads: SharedReads, at: dt.datetime) -> HeldCalendar:
    """`held_calendar(at)`, its token read once for everything that `reads` serves (the
    launch check's advisors and the capacity outlook)."""
    return reads.get("calendars.held", lambda: held_calendar(at))


def shared_live_windows(reads: SharedReads, now: dt.datetime) -> list[MaintenanceWindow]:
    """`selectors.live_windows(now)` from the held calendar."""
    return shared_calendar(reads, now).live_windows(now)


def shared_occurrences(reads: SharedReads, gpu_type: GpuType, since: dt.datetime,
                       until: dt.datetime) -> list[Occurrence]:
    """`selectors.occurrences_between(gpu_type, since, until)` from the held calendar,
    computed once for everything that `reads` serves."""
    return reads.get(("calendars.occurrences", gpu_type.pk, since, until),
                     lambda: shared_calendar(reads, since).occurrences(gpu_type, since, until))
