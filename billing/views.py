"""The monthly report page, `/reports/` (the API: api/urls.py): a month's GPU-hours, CPU-hours,
storage and cost per department, project, principal investigator or grant, as a table and a
chart of the cost per group, with the same figures as CSV and JSON (the API's addresses). For
the projects' managers, their departments' admins and admins (billing.selectors), others 403;
another project named in the query is a 404."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from core.validation import Refused, ascii_digits
from identity.access import SignedInRequest, project_required

from .costing import GROUP_COLUMNS, GROUPINGS, report_cell
from .selectors import NoReports, usage_report, visible_tenants_for_report
from .validation import month

GROUP_LABELS = {"department": "department", "tenant": "project", "pi": "principal investigator",
                "grant": "grant"}


def chart_data(rows: list[dict[str, Any]], group_by: str, currency: str) -> dict[str, Any]:
    """What static/js/charts.js draws: each group's name and its cost by resource."""
    name = GROUP_COLUMNS[group_by][-1]
    return {"labels": [str(row[name]) or "(none)" for row in rows],
            "gpu": [float(row["gpu_cost"]) for row in rows],
            "cpu": [float(row["cpu_cost"]) for row in rows],
            "storage": [float(row["storage_cost"]) for row in rows], "currency": currency}


@project_required
@require_GET
def report_page(request: SignedInRequest) -> HttpResponse:
    query = request.GET
    errors: dict[str, str] = {}
    period = query.get("period") or f"{timezone.localdate():%Y-%m}"
    group_by = query.get("group_by") or "department"
    tenant = query.get("tenant") or ""
    try:
        wanted = month(period)
    except Refused as exc:
        errors["period"], wanted = str(exc), timezone.localdate().replace(day=1)
    if group_by not in GROUPINGS:
        errors["group_by"], group_by = f"One of {', '.join(GROUPINGS)}.", "department"
    if tenant and not (ascii_digits(tenant) and len(tenant) <= 18):
        errors["tenant"], tenant = "A project from the list.", ""
    try:
        report = usage_report(request.identity, month=wanted, group_by=group_by,
                              tenant=int(tenant) if tenant else None)
    except NoReports as exc:
        raise PermissionDenied(str(exc)) from None
    api = {"period": report.period, "group_by": group_by, **({"tenant": tenant} if tenant else {})}
    base = reverse("api:report-usage")
    columns = [c for c in report.columns if c != "currency"]
    return render(request, "billing/report.html", {
        "report": report, "period": report.period, "group_by": group_by, "tenant": tenant,
        "errors": errors, "group_choices": [(g, GROUP_LABELS[g]) for g in GROUPINGS],
        "tenants": visible_tenants_for_report(request.identity),
        "columns": columns,
        "table": [[report_cell(row, c) for c in columns] for row in report.rows],
        "totals": [report_cell({**report.totals, columns[0]: "total"}, c) for c in columns],
        "chart": chart_data(report.rows, group_by, report.currency),
        "csv_url": f"{base}?{urlencode({**api, 'format': 'csv'})}",
        "json_url": f"{base}?{urlencode({**api, 'format': 'json'})}",
    }, status=400 if errors else 200)

