"""The admin's calendar page, under /admin/ (admin_urls.py): announce and cancel maintenance
windows, set each project's reservation allowance, and each GPU type's capacity in the next 24
hours. The forms validate through validation.window_clean (the API's validation); the writes
are the services' (audited)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from catalogue.models import GpuType
from catalogue.selectors import capacity_outlook
from core.registry import SharedReads
from identity.access import SignedInRequest, admin_required
from identity.scoping import Action
from tenants.models import Tenant

from .forms import allowance_form_data, window_form_data
from .models import MaintenanceWindow, ReservationAllowance
from .relayout import gpu_node_rows, plan_lines
from .services import allowance_set, window_cancel, window_create
from .validation import WindowInvalid, window_clean

BLANK_WINDOW = {"covers": "gpu_type", "gpu_type": "", "nodes": "", "node_selector": "",
                "start": "", "end": "", "reason": "", "drain": False, "relayout": ""}


def _render(request: SignedInRequest, *, values: dict[str, Any] | None = None,
            errors: dict[str, list[str]] | None = None, status: int = 200) -> HttpResponse:
    now = timezone.now()
    windows = (MaintenanceWindow.objects.live().filter(end__gt=now)
               .exclude(state=MaintenanceWindow.State.ENDED).select_related("gpu_type"))
    allowances = {a.tenant_id: a for a in ReservationAllowance.objects.restrict(
        request.identity, Action.VIEW)}
    tenants = (Tenant.objects.restrict(request.identity, Action.VIEW)
               .filter(state__in=("new", "provisioned", "drifted")).order_by("name"))
    types = list(GpuType.objects.filter(enabled=True).order_by("slug"))
    reads = SharedReads()  # the live windows, read once for every type
    return render(request, "calendars/admin.html", {
        "windows": [(w, plan_lines(w), sorted((w.relayout_state or {}).items()))
                    for w in windows],
        "gpu_nodes": gpu_node_rows(), "types": types,
        "capacity": [(t, capacity_outlook(t, now=now, reads=reads)) for t in types],
        "tenants": [(t, allowances.get(t.pk)) for t in tenants],
        "values": values or BLANK_WINDOW, "errors": errors or {},
        "zone": timezone.get_current_timezone_name(),
    }, status=status)


@admin_required
@require_GET
def calendar_admin(request: SignedInRequest) -> HttpResponse:
    return _render(request)


@admin_required
@require_POST
def window_announce(request: SignedInRequest) -> HttpResponse:
    post = request.POST
    values = {**{k: post.get(k, "") for k in BLANK_WINDOW}, "drain": bool(post.get("drain"))}
    try:
        fields = window_clean(window_form_data(post))
    except WindowInvalid as exc:
        return _render(request, values=values, errors=exc.errors, status=400)
    window = window_create(acting_user=request.user, fields=fields)
    covered = len(window.affected or {})
    messages.success(request, f"Maintenance #{window.pk} is announced ({window.target_text}; "
                              f"{covered} node{'s' if covered != 1 else ''}).")
    return redirect("calendars:admin")


@admin_required
@require_POST
def window_remove(request: SignedInRequest, pk: int) -> HttpResponse:
    window = get_object_or_404(MaintenanceWindow, pk=pk)
    if window_cancel(window=window, acting_user=request.user):
        messages.success(request, f"Maintenance #{window.pk} is cancelled.")
    else:
        messages.info(request, f"Maintenance #{window.pk} had ended or was cancelled already.")
    return redirect("calendars:admin")


@admin_required
@require_POST
def allowance_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(Tenant.objects.restrict(request.identity, Action.VIEW), pk=pk)
    clean, errors = allowance_form_data(request.POST)
    if errors:
        for field, msgs in errors.items():
            messages.error(request, f"{tenant.name}, {field}: {' '.join(msgs)}")
        return redirect("calendars:admin")
    allowance_set(tenant=tenant, acting_user=request.user, **clean)
    messages.success(request, f"{tenant.name}'s managers may hold {clean['gpu_hours']} "
                              f"GPU-hours of reservations, up to {clean['max_days_ahead']} "
                              f"days ahead.")
    return redirect("calendars:admin")
