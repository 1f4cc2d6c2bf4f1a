"""Reads of the catalogue that apps above it add to: what a GPU type's capacity will be in the
next hours (the capacity view's free GPUs now, less what every entry of hooks.CAPACITY_OUTLOOKS
takes out: the calendar's maintenance windows and other tenants' reservations)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from django.utils import timezone

from cluster.capacity import gpu_capacity
from core.registry import SharedReads
from kube.client import KubeError

from .hooks import CAPACITY_OUTLOOKS, Taken
from .models import GpuType

AHEAD = dt.timedelta(hours=24)  # how far the capacity outlook looks


@dataclasses.dataclass(frozen=True)
class Change:
    """From `at`, `free` GPUs of the type are free (as far as the outlook's entries change it),
    because of `why` ("maintenance", "reserved", "maintenance ends", "reservation ends")."""

    at: dt.datetime
    free: int
    why: str


def when_text(at: dt.datetime, now: dt.datetime) -> str:
    """"14:00" today, "Tue 14:00" within the week, "2026-12-01 14:00" further (the portal's
    time zone)."""
    local, today = timezone.localtime(at), timezone.localtime(now)
    if local.date() == today.date():
        return f"{local:%H:%M}"
    if (local.date() - today.date()).days < 7:
        return f"{local:%a %H:%M}"
    return f"{local:%Y-%m-%d %H:%M}"


def _out_at(taken: list[Taken], at: dt.datetime) -> int:
    return sum(t.gpus for t in taken if t.start <= at < t.end)


def changes_ahead(free_now: int, taken: list[Taken], now: dt.datetime, until: dt.datetime
                  ) -> list[Change]:
    """How `taken` changes the free GPUs after `now`, before `until`. What is out now is
    already out of `free_now` (cordoned nodes offer nothing); a change counts against it what
    more is out then. The reason given is that of the first of `taken` (in the entries' order)
    to start (or end) at that instant."""
    base = _out_at(taken, now)
    changes: list[Change] = []
    last = free_now
    for at in sorted({t for i in taken for t in (i.start, i.end) if now < t < until}):
        free = max(free_now - (_out_at(taken, at) - base), 0)
        if free == last:
            continue
        if free < last:
            why = next((i.starts for i in taken if i.start == at), taken[0].starts)
        else:
            why = next((i.ends for i in taken if i.end == at), taken[0].ends)
        changes.append(Change(at, free, why))
        last = free
    return changes


def capacity_text(slug: str, free_now: int, changes: list[Change], now: dt.datetime) -> str:
    """"4 a100 free now, 0 from 14:00 (maintenance), 4 from 18:00 (maintenance ends)"."""
    parts = [f"{free_now} {slug} free now"]
    parts += [f"{c.free} from {when_text(c.at, now)} ({c.why})" for c in changes]
    return ", ".join(parts)


def capacity_outlook(gpu_type: GpuType, *, tenant: Any = None, now: dt.datetime | None = None,
                     free_now: int | None = None, reads: SharedReads | None = None
                     ) -> dict[str, Any] | None:
    """{free_now, changes: [{at, free, why}], text} for the type over the next AHEAD, every
    entry of CAPACITY_OUTLOOKS taken out together. None: no entry is registered, or the cluster
    cannot say what is free now. `free_now`: the capacity view's, when the caller has it;
    `reads`: what the caller's other readers read already (the launch check's)."""
    if not len(CAPACITY_OUTLOOKS):
        return None
    if free_now is None:
        try:
            pool = gpu_capacity().get(gpu_type.slug)
        except KubeError:
            return None
        free_now = pool.free if pool is not None else 0
    now = now or timezone.now()
    until = now + AHEAD
    reads = reads or SharedReads()
    taken = [t for outlook in CAPACITY_OUTLOOKS
             for t in outlook(gpu_type, tenant=tenant, since=now, until=until, reads=reads)]
    changes = changes_ahead(free_now, taken, now, until)
    return {"free_now": free_now,
            "changes": [{"at": c.at, "free": c.free, "why": c.why} for c in changes],
            "text": capacity_text(gpu_type.slug, free_now, changes, now)}
