"""Writes of the calendar: book and cancel reservations, set a tenant's allowance, announce and
cancel maintenance windows. Each is atomic and audited; what follows in the cluster (a queue
raised, nodes cordoned) is the beat's work (tasks.py), which acts on what is written here.

Bookings of a GPU type are serialised by a lock on its row, so two concurrent bookings can never
both take the last GPUs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.services import Actor, audit_record
from catalogue.models import GpuType
from core.tasks import send_on_commit
from identity.models import User
from tenants.models import Tenant

from .models import MaintenanceWindow, Reservation, ReservationAllowance
from .relayout import relayout_plan
from .selectors import HORIZON, booked_intervals, down_intervals, type_capacity, window_nodes
from .timeline import Interval, gpu_hours, overbooking
from .validation import MAX_RESERVATION


class CalendarRefused(Exception):
    """A calendar write refused as a whole; the message says why."""

    code = "calendar_refused"
    status = 409


class Overbooked(CalendarRefused):
    code = "overbooked"


class AllowanceExceeded(CalendarRefused):
    """A manager's booking beyond the tenant's allowance."""

    code = "reservation_allowance"
    status = 403


def _user(actor: Actor) -> User | None:
    return actor if isinstance(actor, User) and actor.pk else None


def reservation_snapshot(reservation: Reservation) -> dict[str, Any]:
    return {"id": reservation.pk, "tenant": reservation.tenant.name,
            "gpu_type": reservation.gpu_type.slug, "count": reservation.count,
            "start": reservation.start.isoformat(), "end": reservation.end.isoformat(),
            "recurrence": reservation.recurrence,
            "until": reservation.until.isoformat() if reservation.until else None,
            "note": reservation.note}


def window_snapshot(window: MaintenanceWindow) -> dict[str, Any]:
    return {"id": window.pk, "nodes": window.nodes, "node_selector": window.node_selector,
            "gpu_type": window.gpu_type.slug if window.gpu_type else None,
            "start": window.start.isoformat(), "end": window.end.isoformat(),
            "reason": window.reason, "drain": window.drain, "state": window.state,
            "affected": sorted(window.affected or {}),
            **({"relayout": window.relayout, "relayout_plan": window.relayout_plan}
               if window.relayout else {})}


def _wanted(reservation: Reservation, now: dt.datetime) -> list[Interval]:
    return [Interval(start, end, reservation.count)
            for start, end in reservation.occurrences(now, now + HORIZON)]


def _allowance_check(tenant: Tenant, wanted: list[Interval], now: dt.datetime) -> None:
    allowance = ReservationAllowance.objects.filter(tenant=tenant).first()
    if allowance is None or not allowance.gpu_hours:
        raise AllowanceExceeded(f"{tenant.name} has no reservation allowance: only a portal "
                                "administrator can book GPUs for it.")
    furthest = now + dt.timedelta(days=allowance.max_days_ahead)
    late = [i for i in wanted if i.start > furthest]
    if late:
        raise AllowanceExceeded(f"{tenant.name}'s managers may book at most "
                                f"{allowance.max_days_ahead} days ahead; an occurrence starts "
                                f"{late[0].start:%Y-%m-%d %H:%M} UTC.")
    held = 0.0
    for other in Reservation.objects.live().filter(tenant=tenant, against_allowance=True):
        held += gpu_hours(Interval(max(s, now), e, other.count)
                          for s, e in other.occurrences(now, now + HORIZON))
    held += _cancelled_hours(tenant, now)
    asked = gpu_hours(Interval(max(i.start, now), i.end, i.gpus) for i in wanted)
    if held + asked > allowance.gpu_hours:
        raise AllowanceExceeded(
            f"{tenant.name} may hold {allowance.gpu_hours} GPU-hours of reservations to come; "
            f"it holds {held:.1f} and this one asks {asked:.1f}.")


def _cancelled_hours(tenant: Tenant, now: dt.datetime) -> float:
    """The GPU-hours the tenant's managers' reservations cancelled while an occurrence ran
    had used by then, until that occurrence's planned end: cancelling gives back what was not
    used yet, never what was (else cancelling and booking again would refill the allowance
    while the same GPUs stay in use)."""
    used = 0.0
    for cancelled in Reservation.objects.filter(
            tenant=tenant, against_allowance=True, cancelled_at__isnull=False,
            cancelled_at__gt=now - MAX_RESERVATION, start__lt=now):
        at = cancelled.cancelled_at
        if at is None:  # not so: the filter says
            continue
        used += gpu_hours(Interval(start, at, cancelled.count)
                          for start, end in cancelled.occurrences(at, at + MAX_RESERVATION)
                          if start < at < end and end > now)
    return used


def reservation_create(*, tenant: Tenant, acting_user: Actor, fields: dict[str, Any],
                       within_allowance: bool) -> Reservation:
    """Book validated fields (validation.reservation_clean) for `tenant`. `within_allowance`:
    the booker is one of its managers, not an admin (AllowanceExceeded beyond it; what admins
    booked for the tenant does not count against it). Overbooked
    when at any instant of any occurrence the type's capacity, less its maintenance windows
    then, cannot hold it beside the other reservations."""
    now = timezone.now()
    with transaction.atomic():
        gpu_type = GpuType.objects.select_for_update().get(pk=fields["gpu_type"].pk)
        reservation = Reservation(tenant=tenant, created_by=_user(acting_user),
                                  against_allowance=within_allowance, **fields)
        wanted = _wanted(reservation, now)
        if not wanted:
            raise Overbooked("No occurrence of this reservation is still to come.")
        if within_allowance:
            _allowance_check(tenant, wanted, now)
        since, until = wanted[0].start, wanted[-1].end
        capacity = type_capacity(gpu_type)
        conflict = overbooking(capacity, wanted, booked_intervals(gpu_type, since, until,
                                                                  tenant_names=False),
                               down_intervals(gpu_type, since, until))
        if conflict is not None:
            raise Overbooked(conflict.text(gpu_type.slug))
        reservation.save()
        audit_record(actor=acting_user, action="reservation.create", tenant=tenant,
                     target=f"reservation #{reservation.pk}", before=None,
                     after=reservation_snapshot(reservation))
    return reservation


def reservation_cancel(*, reservation: Reservation, acting_user: Actor) -> bool:
    """Cancel a reservation, its occurrence running now too: the beat, sent at once, lowers the
    quota and tells the owners of the workloads beyond it, which are put back in line or
    stopped after the end's grace (calendars/reservations.py). What a running occurrence used
    until now still counts against the allowance until its planned end. False: it was
    cancelled already."""
    with transaction.atomic():
        done = Reservation.objects.filter(pk=reservation.pk, cancelled_at__isnull=True) \
            .update(cancelled_at=timezone.now())
        if not done:
            return False
        reservation.refresh_from_db()
        audit_record(actor=acting_user, action="reservation.cancel", tenant=reservation.tenant,
                     target=f"reservation #{reservation.pk}",
                     before=reservation_snapshot(reservation), after=None)
        send_on_commit("calendars.tasks.reservations_task")
    return True


def allowance_set(*, tenant: Tenant, acting_user: Actor, gpu_hours: int,
                  max_days_ahead: int) -> ReservationAllowance:
    with transaction.atomic():
        allowance, _ = ReservationAllowance.objects.select_for_update().get_or_create(tenant=tenant)
        before = {"gpu_hours": allowance.gpu_hours, "max_days_ahead": allowance.max_days_ahead}
        allowance.gpu_hours, allowance.max_days_ahead = gpu_hours, max_days_ahead
        allowance.save()
        after = {"gpu_hours": gpu_hours, "max_days_ahead": max_days_ahead}
        if after != before:
            audit_record(actor=acting_user, action="reservation.allowance", tenant=tenant,
                         target=tenant.namespace, before=before, after=after)
    return allowance


def window_create(*, acting_user: Actor, fields: dict[str, Any]) -> MaintenanceWindow:
    """Announce a validated window (validation.window_clean): the nodes it covers are resolved
    now from the cluster's read model (again at its start), and a re-layout's plan worked out
    (calendars/relayout.py: the capacity it moves, the quotas it would leave beyond it)."""
    with transaction.atomic():
        window = MaintenanceWindow(created_by=_user(acting_user), **fields)
        window.affected = window_nodes(window)
        window.relayout_plan = relayout_plan(window.relayout)
        window.save()
        audit_record(actor=acting_user, action="maintenance.announce",
                     target=f"maintenance #{window.pk}", before=None,
                     after=window_snapshot(window))
        # the owners of the workloads it would reach are told (calendars/maintenance.py)
        send_on_commit("calendars.tasks.maintenance_announce_task", window.pk)
    return window


def window_cancel(*, window: MaintenanceWindow, acting_user: Actor) -> bool:
    """Cancel a window not yet ended. One in progress ends at once (the beat uncordons what it
    cordoned). False: already cancelled or ended."""
    with transaction.atomic():
        now = timezone.now()
        done = MaintenanceWindow.objects.filter(
            pk=window.pk, cancelled_at__isnull=True,
            state__in=(MaintenanceWindow.State.ANNOUNCED, MaintenanceWindow.State.ACTIVE),
        ).update(cancelled_at=now, end=now if window.start < now else window.end)
        if not done:
            return False
        window.refresh_from_db()
        audit_record(actor=acting_user, action="maintenance.cancel",
                     target=f"maintenance #{window.pk}", before=window_snapshot(window),
                     after=None)
        # called off (those told are told), or, in progress, ended: uncordoned now
        send_on_commit("calendars.tasks.maintenance_window_task", window.pk)
    return True
