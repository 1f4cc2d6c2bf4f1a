"""The usage pages of the researchers: the usage report of a tenant's own (`/usage/`, any member
of the project; the admin's, every tenant, is admin_views.py's `/admin/usage/`), and one
workload's GPU usage on its page: the chart's JSON, "I still need it", and the admin's exemption
from idle culling. Server-rendered; the report's CSV link is the API's `?format=csv` with the
same query, so the page and the export can never disagree. Every workload lookup is a
`scoped_object`: another tenant's workload is a 404."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.redirects import safe_redirect_target
from identity.access import (
    PortalRequest,
    SignedInRequest,
    admin_required,
    project_required,
    scoped_object,
)
from identity.scoping import Action
from tenants.models import Tenant
from workloads.models import Workload

from .charts import chart_window, workload_gpu_series
from .culling import IdleExtendRefused, workload_cull_exempt_set, workload_idle_extend
from .forms import GROUP_BY, UsageQueryForm
from .selectors import report_columns, usage_report_for

LABELS = {
    "tenant_id": "tenant id", "user_id": "user id", "gpu_type": "GPU type",
    "gpu_type_name": "GPU type name", "workload_id": "workload id",
    "gpu_hours_allocated": "GPU-hours allocated", "gpu_hours_used": "GPU-hours used",
    "utilisation_percent": "used / allocated %", "util_avg": "mean utilisation %",
    "util_max": "peak utilisation %", "samples": "samples", "workloads": "workloads",
    "storage_gib_days": "storage GiB-days",
}
GROUP_LABELS = {"tenant": "tenant", "user": "user", "gpu_type": "GPU type",
                "workload": "workload", "day": "day", "cluster": "cluster"}


def report_page(request: PortalRequest, *, admin: bool) -> HttpResponse:
    form = UsageQueryForm(request.GET)
    context: dict[str, Any] = {"form": form, "group_choices": [(g, GROUP_LABELS[g]) for g in GROUP_BY], "admin": admin, "rows": None}
    if admin:
        context["tenants"] = Tenant.objects.restrict(request.identity, Action.VIEW).order_by("name")
    if form.is_valid():
        query = form.cleaned_data
        tenant = query["tenant"]
        if not admin:  # a member's page is always their current project's
            tenant = ""  # the rollups' restriction keeps it to the current project
        rows, totals = usage_report_for(
            request.identity, tenant=tenant, workload=query["workload"],
            since=query["since"], until=query["until"], group_by=query["group_by"])
        params = {"since": query["since"].isoformat(), "until": query["until"].isoformat(),
                  "group_by": query["group_by"]}
        if tenant:
            params["tenant"] = tenant
        if query["workload"]:
            params["workload"] = query["workload"]
        columns = report_columns(query["group_by"])
        context.update(
            rows=rows, headers=[LABELS.get(c, c) for c in columns],
            table=[[row[c] for c in columns] for row in rows], totals=totals,
            query=query,
            csv_url=f"{reverse('api:usage')}?{urlencode({**params, 'format': 'csv'})}")
    return render(request, "usage/report.html", context)


@project_required
def usage_page(request: PortalRequest) -> HttpResponse:
    return report_page(request, admin=False)


@project_required
@require_GET
@scoped_object(Workload)
def workload_gpu_usage(request: HttpRequest, workload: Workload) -> JsonResponse:
    """The chart's series (`?minutes=` one of charts.WINDOWS_MINUTES)."""
    series = workload_gpu_series(workload, minutes=chart_window(request.GET.get("minutes")))
    response = JsonResponse(series)
    response["Cache-Control"] = "no-store"
    return response


@project_required
@require_POST
@scoped_object(Workload, Action.CHANGE)
def workload_still_needed(request: SignedInRequest, workload: Workload) -> HttpResponse:
    """"I still need it": withdraw the idle warning; the idle period starts again."""
    try:
        workload_idle_extend(workload=workload, user=request.user)
    except IdleExtendRefused as exc:
        messages.info(request, str(exc))
    else:
        messages.success(request, f"{workload.name} is kept: the idle warning is withdrawn.")
    return redirect(workload)


@admin_required
@require_POST
@scoped_object(Workload, Action.CHANGE)
def workload_cull_exempt(request: SignedInRequest, workload: Workload) -> HttpResponse:
    """An admin exempts a workload from idle culling (exempt=1) or ends it (exempt=0)."""
    exempt = request.POST.get("exempt") == "1"
    workload_cull_exempt_set(workload=workload, exempt=exempt, acting_user=request.user,
                             note=request.POST.get("note", "").strip())
    messages.success(request, f"{workload.name} is {'now' if exempt else 'no longer'} exempt "
                              "from idle culling.")
    return redirect(safe_redirect_target(request, request.POST.get("next"))
                    or workload.get_absolute_url())
