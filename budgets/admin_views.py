"""The admin's budget pages, under /admin/ (admin_urls.py): every project's budget (used,
percent, forecast, hard) and one project's budget form (set, change, remove). The form
validates through validation.budget_clean, the API's validation."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from identity.access import SignedInRequest, admin_required
from identity.client import KeystoneUnavailable
from identity.scoping import Action
from tenants.models import Tenant

from .forms import budget_form_data, budget_form_values
from .models import Budget
from .selectors import budget_of, budget_status, budget_statuses, top_users
from .services import budget_delete, budget_set
from .validation import BudgetInvalid, budget_clean


@admin_required
@require_http_methods(["GET"])
def budgets_overview(request: SignedInRequest) -> HttpResponse:
    budgets = Budget.objects.restrict(request.identity, Action.VIEW).select_related("tenant")
    without = (Tenant.objects.restrict(request.identity, Action.VIEW)
               .filter(budget__isnull=True, state__in=("new", "provisioned", "drifted"))
               .order_by("name"))
    return render(request, "budgets/admin_overview.html", {
        "statuses": budget_statuses(budgets), "without": without})


@admin_required
@require_http_methods(["GET", "POST"])
def budget_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(Tenant.objects.restrict(request.identity, Action.VIEW), pk=pk)
    budget = budget_of(tenant)
    values = budget_form_values(budget)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        data, errors = budget_form_data(request.POST)
        values = {**{k: request.POST.get(k, "") for k in values},
                  "hard": bool(request.POST.get("hard")),
                  "stop_at_exhaustion": bool(request.POST.get("stop_at_exhaustion"))}
        try:
            fields = budget_clean(data, tenant=tenant)
        except BudgetInvalid as exc:
            errors = {**exc.errors, **errors}
        except KeystoneUnavailable:
            errors = {"user_caps": ["Keystone cannot be reached to check the project's users; "
                                    "try again in a moment."], **errors}
        if not errors:
            budget_set(tenant=tenant, acting_user=request.user, fields=fields)
            messages.success(request, f"The budget of {tenant.name} was saved.")
            return redirect("budgets:admin-edit", pk=tenant.pk)
    status = budget_status(tenant, budget=budget, lookup=False)
    return render(request, "budgets/admin_edit.html", {
        "tenant": tenant, "budget": budget, "values": values, "errors": errors,
        "periods": Budget.Period.choices, "status": status, "top_users": top_users(status),
    }, status=400 if errors else 200)


@admin_required
@require_POST
def budget_remove(request: SignedInRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(Tenant.objects.restrict(request.identity, Action.VIEW), pk=pk)
    if budget_delete(tenant=tenant, acting_user=request.user):
        messages.success(request, f"{tenant.name} has no budget now.")
    return redirect("budgets:admin-edit", pk=tenant.pk)
