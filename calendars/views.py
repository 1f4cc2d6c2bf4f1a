"""The calendar pages (`/calendar/`, anyone in a project): one GPU type's two weeks — its
capacity, what is reserved (the project's own reservations with their note and, for its
managers, a cancel button; other projects' as "reserved", named to admins only), the
maintenance windows, and what is left to book over time (a server-rendered table: readable
without JavaScript). Its booking form: admins for any project, managers for theirs within the
allowance (services.reservation_create says no otherwise, with the reason).
The admin's pages are admin_views.py."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET, require_POST

from catalogue.models import GpuType
from identity.access import project_required, scoped_object, tenant_required
from identity.scoping import Action
from tenants.middleware import TenantRequest
from tenants.models import Tenant

from .forms import local_input, reservation_form_data
from .models import MaintenanceWindow, Reservation, ReservationAllowance
from .reservations import end_rule_text
from .selectors import calendar_data
from .services import CalendarRefused, reservation_cancel, reservation_create
from .validation import ReservationInvalid, reservation_clean

SPAN = dt.timedelta(days=14)


def _since(request: TenantRequest) -> dt.datetime:
    today = timezone.localdate()
    try:
        day = parse_date(request.GET.get("from") or "") or today
    except ValueError:  # well formed, no such day (2026-02-31)
        day = today
    if abs((day - today).days) > 400:
        day = today
    return timezone.make_aware(dt.datetime.combine(day, dt.time()))


def calendar_context(request: TenantRequest, gpu_type: GpuType | None, since: dt.datetime,
                     **extra: Any) -> dict[str, Any]:
    identity, tenant = request.identity, request.tenant
    types = list(GpuType.objects.filter(enabled=True).order_by("slug"))
    context: dict[str, Any] = {"types": types, "gpu_type": gpu_type, "tenant": tenant,
                               "since": since, "until": since + SPAN,
                               "zone": timezone.get_current_timezone_name()}
    if gpu_type is None:
        return {**context, **extra}
    until = since + SPAN
    admin = identity.is_admin
    data = calendar_data(gpu_type, since, until, shows=lambda r: Reservation.objects.permits(
        identity, Action.VIEW, r))
    shown = {r.pk: r for r in Reservation.objects.filter(
        pk__in={e["id"] for e in data["reservations"] if e["id"] is not None})}
    cancellable = set(Reservation.objects.restrict(identity, Action.CHANGE)
                      .filter(pk__in=shown).values_list("pk", flat=True))
    bookings = [{**entry, "reservation": shown.get(entry["id"]),
                 "cancellable": entry["id"] in cancellable} for entry in data["reservations"]]
    windows = {w.pk: w for w in MaintenanceWindow.objects.filter(
        pk__in=[w["id"] for w in data["windows"]])}
    manager = tenant is not None and Tenant.objects.permits(identity, Action.CHANGE, tenant)
    allowance = (ReservationAllowance.objects.filter(tenant=tenant).first()
                 if tenant is not None else None)
    day = timezone.localtime(since).date()
    now = timezone.now()
    context.update(
        capacity=data["capacity"],
        segments=[{**s, "now": s["start"] <= now < s["end"]} for s in data["segments"]],
        bookings=bookings,
        windows=[{**w, "window": windows[w["id"]]} for w in data["windows"]],
        previous=(day - SPAN).isoformat(), next=(day + SPAN).isoformat(),
        may_book=admin or (manager and allowance is not None and allowance.gpu_hours > 0),
        manager=manager, allowance=allowance, admin=admin, end_rule=end_rule_text(),
        book_tenants=(list(Tenant.objects.restrict(identity, Action.CHANGE)
                           .filter(state__in=("new", "provisioned", "drifted")).order_by("name"))
                      if admin else []),
        values={"gpu_type": gpu_type.slug, "count": "1",
                "start": local_input(max(since, now).replace(second=0, microsecond=0)
                                     + dt.timedelta(hours=1)),
                "end": "", "until": "", "note": "", "weekly": False,
                "tenant": str(tenant.pk) if tenant is not None else ""},
        errors={}, refused="")
    context.update(extra)
    return context


def _type_named(slug: str | None) -> GpuType | None:
    types = GpuType.objects.filter(enabled=True).order_by("slug")
    return (types.filter(slug=slug).first() if slug else None) or types.first()


@project_required
@require_GET
@tenant_required(Action.VIEW)
def calendar_page(request: TenantRequest) -> HttpResponse:
    return render(request, "calendars/calendar.html",
                  calendar_context(request, _type_named(request.GET.get("gpu_type")),
                                   _since(request)))


def _calendar_url(gpu_type: GpuType, when: dt.datetime | None = None) -> str:
    url = f"{reverse('calendars:calendar')}?gpu_type={gpu_type.slug}"
    if when is not None:
        url += f"&from={timezone.localtime(when).date().isoformat()}"
    return url


@project_required
@require_POST
@tenant_required(Action.CHANGE)
def book(request: TenantRequest) -> HttpResponse:
    """Book GPUs: an admin for the project chosen, a manager for their own (within the
    allowance). Refused: the calendar again with the reason (400 invalid, 403 beyond the
    allowance, 409 overbooked)."""
    identity = request.identity
    tenant: Tenant | None = request.tenant
    if identity.is_admin and request.POST.get("tenant"):
        tenant = (Tenant.objects.restrict(identity, Action.CHANGE)
                  .filter(pk=request.POST["tenant"]).first()
                  if re.fullmatch(r"[0-9]{1,18}", request.POST["tenant"]) else None)
    gpu_type = _type_named(request.POST.get("gpu_type"))
    values = {**{k: request.POST.get(k, "") for k in
                 ("gpu_type", "count", "start", "end", "until", "note", "tenant")},
              "weekly": bool(request.POST.get("weekly"))}
    errors: dict[str, list[str]] = {}
    refused, status = "", 400
    if tenant is None:
        errors["tenant"] = ["Choose a project."]
    try:
        fields = reservation_clean(reservation_form_data(request.POST))
    except ReservationInvalid as exc:
        errors = {**exc.errors, **errors}
    if not errors and tenant is not None:
        try:
            reservation = reservation_create(tenant=tenant, acting_user=request.user,
                                             fields=fields,
                                             within_allowance=not identity.is_admin)
        except CalendarRefused as exc:
            refused, status = str(exc), exc.status
        else:
            messages.success(request, f"{reservation.count} {reservation.gpu_type.slug} GPUs "
                                      f"are reserved for {tenant.name}.")
            return redirect(_calendar_url(reservation.gpu_type, reservation.start))
    return render(request, "calendars/calendar.html",
                  calendar_context(request, gpu_type, _since(request), values=values,
                                   errors=errors, refused=refused),
                  status=status)


@project_required
@require_POST
@scoped_object(Reservation, Action.CHANGE)
def cancel(request: TenantRequest, reservation: Reservation) -> HttpResponse:
    if reservation_cancel(reservation=reservation, acting_user=request.user):
        messages.success(request, f"The reservation of {reservation.count} "
                                  f"{reservation.gpu_type.slug} GPUs for "
                                  f"{reservation.tenant.name} is cancelled.")
    else:
        messages.info(request, "That reservation was cancelled already.")
    return redirect(_calendar_url(reservation.gpu_type))

