"""The project's budget page (`/budget/`, any member, manager or reader of the current project):
where the budget stands, the burn-down chart (uPlot, fed by `/budget/chart/`), the top users,
the reset. Server-rendered; the chart's numbers are a JSON address too."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from identity.access import project_required, tenant_required
from identity.scoping import Action
from tenants.middleware import TenantRequest

from .selectors import budget_status, burn_down, top_users


@project_required
@require_GET
@tenant_required(Action.VIEW)
def budget_page(request: TenantRequest) -> HttpResponse:
    status = budget_status(request.tenant)
    return render(request, "budgets/budget.html", {
        "status": status, "top_users": top_users(status), "tenant": request.tenant})


@project_required
@require_GET
@tenant_required(Action.VIEW)
def budget_chart(request: TenantRequest) -> JsonResponse:
    """The burn-down chart's series (selectors.burn_down)."""
    response = JsonResponse(burn_down(budget_status(request.tenant)))
    response["Cache-Control"] = "no-store"
    return response
