"""What the apps above the catalogue add to it (they import it; it cannot import them): the
GPUs a type's pool loses for a while, for the capacity outlook (selectors.capacity_outlook).
Every entry's answer is used: the outlook takes out what all of them take out together."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Protocol

from core.registry import Hook, SharedReads

from .models import GpuType


@dataclasses.dataclass(frozen=True)
class Taken:
    """`gpus` of a type out of the pool from `start` to `end`; `starts` and `ends` say why in
    the outlook's words ("maintenance" / "maintenance ends", "reserved" / "reservation ends")."""

    start: dt.datetime
    end: dt.datetime
    gpus: int
    starts: str
    ends: str


class CapacityOutlook(Protocol):
    """What takes GPUs of `gpu_type` out of the pool within [since, until), for `tenant` (None:
    for everyone; its own bookings give it GPUs rather than take them). `reads`: what the
    other entries and advisors of the same request read already."""

    def __call__(self, gpu_type: GpuType, *, tenant: Any, since: dt.datetime,
                 until: dt.datetime, reads: SharedReads) -> list[Taken]: ...


CAPACITY_OUTLOOKS = Hook[CapacityOutlook]("catalogue.capacity_outlook", order=("calendars",))
