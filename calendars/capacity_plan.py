"""What the calendar means for capacity, in the portal's words.

- `calendar_taken`: what the maintenance windows and other tenants' reservations take out of a
  GPU type's pool in the next hours: the calendar's entry of the catalogue's capacity outlook
  (catalogue/selectors.py: "4 a100 free now, 0 from 14:00 (maintenance)", the launch check's
  note, the GPU types' API, the admin's GPU and calendar pages), registered in apps.py.
- `queue_blocks`: the blocks the queue estimate (workloads/eta.py) plays around, supplied to
  workloads/queue.py through its hook (apps.py).
- `maintenance_notices`: the announced windows of the next days on the GPU types a tenant has
  quota for: the launch page's and the dashboard's banner.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from django.conf import settings
from django.utils import timezone

from catalogue.hooks import Taken
from catalogue.models import GpuType
from catalogue.selectors import when_text
from core.registry import SharedReads
from tenants.models import Tenant
from tenants.selectors import quota_figures
from workloads.eta import MAINTENANCE, RESERVATION, Block

from .cache import shared_live_windows, shared_occurrences
from .models import MaintenanceWindow
from .selectors import Occurrence, down_intervals, occurrences_between, windows_between
from .timeline import Interval

BANNER_AHEAD = dt.timedelta(days=7)  # how far the maintenance banner looks
QUEUE_AHEAD = dt.timedelta(days=14)  # how far the queue estimate plays around the calendar


def reserved_by_tenant(gpu_type: GpuType, since: dt.datetime, until: dt.datetime,
                       occurrences: list[Occurrence] | None = None
                       ) -> list[tuple[int, Interval]]:
    """(tenant id, occurrence) of every live reservation of the type in [since, until)
    (`occurrences`: those, when the caller read them already)."""
    if occurrences is None:
        occurrences = occurrences_between(gpu_type, since, until)
    return [(o.reservation.tenant_id, Interval(o.start, o.end, o.reservation.count))
            for o in occurrences]


def calendar_taken(gpu_type: GpuType, *, tenant: Tenant | None, since: dt.datetime,
                   until: dt.datetime, reads: SharedReads) -> list[Taken]:
    """What the calendar takes out of the type's pool in [since, until): the maintenance
    windows' GPUs, then other tenants' reservations (`tenant`'s own give it GPUs rather than
    take them). From the calendar held in the process, its version read once per request with
    the launch check's advisors (`reads`)."""
    windows = [w for w in shared_live_windows(reads, since) if w.start < until]
    taken = [Taken(i.start, i.end, i.gpus, "maintenance", "maintenance ends")
             for i in down_intervals(gpu_type, since, until, windows)]
    occurrences = shared_occurrences(reads, gpu_type, since, until)
    taken += [Taken(i.start, i.end, i.gpus, "reserved", "reservation ends")
              for owner, i in reserved_by_tenant(gpu_type, since, until, occurrences)
              if tenant is None or owner != tenant.pk]
    return taken


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
