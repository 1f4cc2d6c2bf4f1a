"""The usage report pages: a tenant's own (`/usage/`, any member of the project) and the admin's
(`/admin/usage/`, every tenant). Server-rendered; the CSV link is the API's `?format=csv`
with the same query, so the page and the export can never disagree."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from identity.access import PortalRequest, admin_required, project_required
from identity.scoping import Action
from tenants.models import Tenant

from .forms import GROUP_BY, UsageQueryForm
from .selectors import report_columns, usage_report, usage_rollups_for_query, usage_totals

LABELS = {
    "tenant_id": "tenant id", "user_id": "user id", "gpu_type": "GPU type",
    "gpu_type_name": "GPU type name", "workload_id": "workload id",
    "gpu_hours_allocated": "GPU-hours allocated", "gpu_hours_used": "GPU-hours used",
    "utilisation_percent": "used / allocated %", "util_avg": "mean utilisation %",
    "util_max": "peak utilisation %", "samples": "samples", "workloads": "workloads",
}
GROUP_LABELS = {"tenant": "tenant", "user": "user", "gpu_type": "GPU type",
                "workload": "workload", "day": "day"}


def _report_page(request: PortalRequest, *, admin: bool) -> HttpResponse:
    form = UsageQueryForm(request.GET)
    context: dict = {"form": form, "group_choices": [(g, GROUP_LABELS[g]) for g in GROUP_BY], "admin": admin, "rows": None}
    if admin:
        context["tenants"] = Tenant.objects.restrict(request.identity, Action.VIEW).order_by("name")
    if form.is_valid():
        query = form.cleaned_data
        tenant = query["tenant"]
        if not admin:  # a member's page is always their current project's
            tenant = ""  # the rollups' restriction keeps it to the current project
        rollups = usage_rollups_for_query(request.identity, tenant=tenant,
                                          workload=query["workload"])
        rows = usage_report(rollups, since=query["since"], until=query["until"],
                            group_by=query["group_by"])
        params = {"since": query["since"].isoformat(), "until": query["until"].isoformat(),
                  "group_by": query["group_by"]}
        if tenant:
            params["tenant"] = tenant
        if query["workload"]:
            params["workload"] = query["workload"]
        columns = report_columns(query["group_by"])
        context.update(
            rows=rows, headers=[LABELS.get(c, c) for c in columns],
            table=[[row[c] for c in columns] for row in rows], totals=usage_totals(rows),
            query=query,
            csv_url=f"{reverse('api:usage')}?{urlencode({**params, 'format': 'csv'})}")
    return render(request, "usage/report.html", context)


@project_required
def usage_page(request: PortalRequest) -> HttpResponse:
    return _report_page(request, admin=False)


@admin_required
def admin_usage_page(request: PortalRequest) -> HttpResponse:
    return _report_page(request, admin=True)
