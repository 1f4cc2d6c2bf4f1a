"""What the calendar means for capacity, in the portal's words: "4 a100 free now, 0
from 14:00 (maintenance)".

- `upcoming`: a GPU type's free GPUs now (the capacity view) and how the calendar changes them
  in the next 24 hours: a maintenance window taking GPUs down, another tenant's reservation
  starting (each taken away from what is free now), either ending (given back).
- `capacity_text`: those as one line; used by the launch page's live check (`capacity_advice`,
  a launch advisor registered in apps.py), the GPU types' API and the admin's GPU page.
- `queue_blocks`: the blocks the queue estimate (workloads/eta.py) plays around, supplied to
  workloads/queue.py through its registry (apps.py).
- `maintenance_notices`: the announced windows of the next days on the GPU types a tenant has
  quota for: the launch page's and the dashboard's banner.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from django.conf import settings
from django.utils import timezone

from catalogue.models import GpuType
from cluster.capacity import gpu_capacity
from kube.client import KubeError
from tenants.models import Tenant
from tenants.selectors import quota_figures
from workloads.eta import MAINTENANCE, RESERVATION, Block

from .models import MaintenanceWindow
from .selectors import down_intervals, occurrences_between, windows_between
from .timeline import Interval

AHEAD = dt.timedelta(hours=24)  # how far the capacity texts look
BANNER_AHEAD = dt.timedelta(days=7)  # how far the maintenance banner looks
QUEUE_AHEAD = dt.timedelta(days=14)  # how far the queue estimate plays around the calendar


@dataclasses.dataclass(frozen=True)
class Change:
    """From `at`, `free` GPUs of the type are free (as far as the calendar changes it), because
    of `why` ("maintenance", "reserved", "maintenance ends", "reservation ends")."""

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


def reserved_by_tenant(gpu_type: GpuType, since: dt.datetime, until: dt.datetime
                       ) -> list[tuple[int, Interval]]:
    """(tenant id, occurrence) of every live reservation of the type in [since, until)."""
    return [(o.reservation.tenant_id, Interval(o.start, o.end, o.reservation.count))
            for o in occurrences_between(gpu_type, since, until)]


def _out_at(intervals: list[Interval], at: dt.datetime) -> int:
    return sum(i.gpus for i in intervals if i.start <= at < i.end)


def upcoming(gpu_type: GpuType, free_now: int, *, tenant: Tenant | None = None,
             now: dt.datetime | None = None, within: dt.timedelta = AHEAD) -> list[Change]:
    """How the calendar changes the type's free GPUs after now, within `within`. What is down
    or reserved now is already out of `free_now` (cordoned nodes offer nothing); a change counts
    against it what more is down or reserved then. `tenant`: the one asking, whose own
    reservations give it GPUs rather than take them."""
    now = now or timezone.now()
    until = now + within
    down = down_intervals(gpu_type, now, until)
    reserved = [i for owner, i in reserved_by_tenant(gpu_type, now, until)
                if tenant is None or owner != tenant.pk]
    base_down, base_reserved = _out_at(down, now), _out_at(reserved, now)
    changes: list[Change] = []
    last = free_now
    for at in sorted({t for i in down + reserved for t in (i.start, i.end) if now < t < until}):
        more_down = _out_at(down, at) - base_down
        more_reserved = _out_at(reserved, at) - base_reserved
        free = max(free_now - more_down - more_reserved, 0)
        if free == last:
            continue
        starting_down = any(i.start == at for i in down)
        starting_reserved = any(i.start == at for i in reserved)
        if free < last:
            why = "maintenance" if starting_down or not starting_reserved else "reserved"
        else:
            why = "maintenance ends" if any(i.end == at for i in down) else "reservation ends"
        changes.append(Change(at, free, why))
        last = free
    return changes


def capacity_text(slug: str, free_now: int, changes: list[Change],
                  now: dt.datetime | None = None) -> str:
    """"4 a100 free now, 0 from 14:00 (maintenance), 4 from 18:00 (maintenance ends)"."""
    now = now or timezone.now()
    parts = [f"{free_now} {slug} free now"]
    parts += [f"{c.free} from {when_text(c.at, now)} ({c.why})" for c in changes]
    return ", ".join(parts)


def free_now(slug: str) -> int | None:
    """The capacity view's free GPUs of a type; None when the cluster cannot say."""
    try:
        pool = gpu_capacity().get(slug)
    except KubeError:
        return None
    return pool.free if pool is not None else 0


def type_upcoming(gpu_type: GpuType, *, tenant: Tenant | None = None,
                  now: dt.datetime | None = None) -> dict[str, Any] | None:
    """{free_now, changes: [{at, free, why}], text} for a type, None when the cluster cannot
    say what is free now (the API's `upcoming`, the admin's GPU page)."""
    free = free_now(gpu_type.slug)
    if free is None:
        return None
    now = now or timezone.now()
    changes = upcoming(gpu_type, free, tenant=tenant, now=now)
    return {"free_now": free,
            "changes": [{"at": c.at, "free": c.free, "why": c.why} for c in changes],
            "text": capacity_text(gpu_type.slug, free, changes, now)}


def capacity_advice(*, tenant: Tenant, user: Any, gpu_type: GpuType, gpus: int,
                    max_runtime_minutes: int | None) -> list[tuple[str, str]]:
    """The launch check's note (a launch advisor): the type's free GPUs now and the calendar's
    changes in the next 24 hours; nothing when the calendar changes nothing."""
    free = free_now(gpu_type.slug)
    if free is None:
        return []
    now = timezone.now()
    changes = upcoming(gpu_type, free, tenant=tenant, now=now)
    if not changes:
        return []
    return [("info", f"{capacity_text(gpu_type.slug, free, changes, now)} — see the "
                     f"calendar.")]


def queue_blocks(gpu_type: GpuType, now: dt.datetime) -> list[Block]:
    """The queue estimate's blocks of a type from now on (workloads/queue.py's registry):
    windows not yet begun (one in progress has its nodes cordoned: they are out of the pool's
    size already) and every tenant's reservations (out for the other tenants)."""
    until = now + QUEUE_AHEAD
    announced = [w for w in windows_between(now, until)
                 if w.state == MaintenanceWindow.State.ANNOUNCED and w.cordoned_at is None]
    blocks = [Block(i.start, i.end, i.gpus, None, MAINTENANCE)
              for i in down_intervals(gpu_type, now, until, announced)]
    for owner, interval in reserved_by_tenant(gpu_type, now, until):
        blocks.append(Block(max(interval.start, now), interval.end, interval.gpus, owner,
                            RESERVATION))
    return blocks


@dataclasses.dataclass(frozen=True)
class Notice:
    window: MaintenanceWindow
    gpu_types: tuple[str, ...]

    @property
    def text(self) -> str:
        """"a100 maintenance Tue 14:00–18:00 UTC: driver update"."""
        now = timezone.now()
        end = timezone.localtime(self.window.end)
        same_day = timezone.localtime(self.window.start).date() == end.date()
        until = f"{end:%H:%M}" if same_day else when_text(self.window.end, now)
        zone = settings.TIME_ZONE
        state = " (in progress)" if self.window.start <= now else ""
        return (f"{', '.join(self.gpu_types)} maintenance{state} "
                f"{when_text(self.window.start, now)}–{until} {zone}: {self.window.reason}")


def maintenance_notices(tenant: Tenant | None, *, now: dt.datetime | None = None,
                        ahead: dt.timedelta = BANNER_AHEAD) -> list[Notice]:
    """The announced or running windows of the next `ahead` on the GPU types `tenant` has
    quota for (those who could be affected): its own or what a running reservation adds,
    whatever maintenance withholds of it."""
    if tenant is None or getattr(tenant, "quota", None) is None:
        return []
    now = now or timezone.now()
    figures = quota_figures(tenant, now=now)
    slugs = {slug for slug in figures.in_force.gpus_by_type
             if figures.before_withheld(slug) > 0}
    notices = []
    for window in windows_between(now, now + ahead):
        types = {entry.get("gpu_type") for entry in (window.affected or {}).values()}
        if window.gpu_type is not None:
            types.add(window.gpu_type.slug)
        hit = tuple(sorted(t for t in types if t in slugs))
        if hit:
            notices.append(Notice(window, hit))
    return notices
