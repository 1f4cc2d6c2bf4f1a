"""Reservations: a booking at a fixed time, far enough ahead for every clock the tests set."""

from __future__ import annotations

import datetime as dt

from calendars.models import Reservation
from calendars.services import reservation_create

START = dt.datetime(2030, 3, 4, 9, 0, tzinfo=dt.UTC)
END = START + dt.timedelta(hours=8)


def book(tenant, gpu_types, *, count: int = 4, start: dt.datetime = START,
         end: dt.datetime = END, user=None, **fields) -> Reservation:
    """A reservation booked now (an hour before START unless the clock says otherwise)."""
    return reservation_create(tenant=tenant, acting_user=user, within_allowance=False,
                              fields={"gpu_type": gpu_types["a100"], "count": count,
                                      "start": start, "end": end, "note": "", **fields})
