"""The admin's prices page, `/admin/prices/` (admin_urls.py): the prices in force and their
history, a form to set the prices from a day on (validated by validation.prices_clean, the
API's validation), and the months: close one that is over (its statement frozen), the closed
ones listed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from catalogue.models import GpuType
from core.validation import FieldsInvalid, Refused
from identity.access import SignedInRequest, admin_required

from .models import MonthClose, MonthReopen
from .selectors import price_sheets, sheet_in_force
from .services import MonthRefused, month_close, month_reopen, prices_set
from .validation import month, prices_clean, reason


def _page(request: SignedInRequest, *, values: dict[str, Any] | None = None,
          errors: dict[str, list[str]] | None = None) -> HttpResponse:
    in_force = sheet_in_force()
    current = ({price.gpu_type.slug: price.per_hour for price in in_force.gpu_prices.all()}
               if in_force is not None else {})
    values = values or {
        "effective_from": timezone.localdate().isoformat(),
        "cpu_hour": "" if in_force is None or in_force.cpu_hour is None else in_force.cpu_hour,
        "storage_gib_month": ("" if in_force is None or in_force.storage_gib_month is None
                              else in_force.storage_gib_month),
        "gpu": {slug: str(price) for slug, price in current.items()}}
    gpu_types = [(t, values["gpu"].get(t.slug, "")) for t in GpuType.objects.order_by("slug")]
    last_month = timezone.localdate().replace(day=1) - dt.timedelta(days=1)
    return render(request, "billing/admin_prices.html", {
        "in_force": in_force, "sheets": price_sheets(), "values": values,
        "gpu_types": gpu_types, "errors": errors or {},
        "months": MonthClose.objects.select_related("closed_by"),
        "reopened": MonthReopen.objects.select_related("reopened_by")[:20],
        "last_month": f"{last_month:%Y-%m}",
    }, status=400 if errors else 200)


@admin_required
@require_GET
def prices_page(request: SignedInRequest) -> HttpResponse:
    return _page(request)


@admin_required
@require_POST
def prices_save(request: SignedInRequest) -> HttpResponse:
    post = request.POST
    gpu = {t.slug: post.get(f"gpu-{t.slug}", "").strip()
           for t in GpuType.objects.only("slug")}
    data = {"effective_from": post.get("effective_from", "").strip(),
            "gpu": {slug: value for slug, value in gpu.items() if value},
            "cpu_hour": post.get("cpu_hour", "").strip() or None,
            "storage_gib_month": post.get("storage_gib_month", "").strip() or None}
    try:
        cleaned = prices_clean(data)
    except FieldsInvalid as exc:
        return _page(request, values={**data, "gpu": gpu}, errors=exc.errors)
    prices_set(acting_user=request.user, **cleaned)
    messages.success(request, f"Prices set from {cleaned['effective_from']:%Y-%m-%d}.")
    return redirect("billing:admin-prices")


@admin_required
@require_POST
def month_close_view(request: SignedInRequest) -> HttpResponse:
    try:
        wanted = month(request.POST.get("period", ""))
        month_close(month=wanted, acting_user=request.user)
    except (Refused, MonthRefused) as exc:
        return _page(request, errors={"period": [str(exc)]})
    messages.success(request, f"{wanted:%Y-%m} is closed: its statement is frozen.")
    return redirect("billing:admin-prices")


@admin_required
@require_POST
def month_reopen_view(request: SignedInRequest) -> HttpResponse:
    """A closed month opened again, with the reason the form gives."""
    try:
        wanted = month(request.POST.get("period", ""))
        why = reason(request.POST.get("reason", ""))
        month_reopen(month=wanted, acting_user=request.user, reason=why)
    except (Refused, MonthRefused) as exc:
        return _page(request, errors={"reopen": [str(exc)]})
    messages.success(request, f"{wanted:%Y-%m} is open again: its reports are worked out "
                              "afresh until it is closed again.")
    return redirect("billing:admin-prices")
