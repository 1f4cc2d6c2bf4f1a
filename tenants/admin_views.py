"""The admin's pages for tenants: table with inline quota editing, detail (with its latest audit
records; the audit page is audit/admin_views.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from audit.models import AuditRecord
from catalogue.images import image_allowed
from catalogue.models import GpuType, Template
from catalogue.sharing import equivalents_text
from core.tasks import send_on_commit
from identity.access import SignedInRequest, admin_required, scoped_object
from identity.client import KeystoneClient, KeystoneError
from identity.scoping import Action, TenantScopedQuerySet
from kube.client import KubeError
from kube.kueue import queueing_shown

from .figures import QuotaUse
from .filtersets import TenantFilterSet
from .forms import DepartmentForm, ImagePrefixesForm
from .models import Department, Quota, Tenant
from .quota_validation import CapacityUnknown, QuotaInvalid, quota_changes_clean
from .selectors import (
    department_standing,
    quota_figures,
    quota_uses_in_cluster,
    tenant_cluster_states,
    tenant_pod_security,
    tenants_with_quota_figures,
)
from .services import (
    QUOTA_FIELDS,
    department_create,
    department_delete,
    department_update,
    quota_update,
    tenant_department_set,
    tenant_image_prefixes_update,
    tenant_mark_deleting,
    tenant_restore,
    tenant_root_templates_update,
)

log = logging.getLogger(__name__)


def _not_deleted(tenants: TenantScopedQuerySet[Tenant]) -> TenantScopedQuerySet[Tenant]:
    return tenants.exclude(state=Tenant.State.DELETED)


def _usage(tenants: Iterable[Tenant]) -> tuple[dict[int, QuotaUse], str | None]:
    """GPUs in use per tenant as its namespace's pods request them (source "cluster": what
    runs, whether or not the portal launched it); (usage, error message or None)."""
    try:
        return quota_uses_in_cluster(tenants), None
    except KubeError as exc:
        log.warning("cluster unreachable for the tenants page: %s", exc)
        return {}, "The cluster is unreachable: GPUs in use are not shown."


def _form_values(quota: Quota, posted: Mapping[str, str]) -> dict[str, object]:
    """The quota form's values: after a refused save what was typed, else what is stored."""
    values = {field: posted.get(field, getattr(quota, field)) for field in QUOTA_FIELDS}
    if posted:
        values["allow_over_capacity"] = "allow_over_capacity" in posted
    values["storage_by_class"] = posted.get("storage_by_class", storage_class_lines(quota))
    return values


def storage_class_lines(quota: Quota) -> str:
    """The per-class storage quota as the page's text area shows it: `CLASS=GIB/VOLUMES`, a
    line each, a side left empty where it is not bounded."""
    def shown(amount: int | None) -> str:
        return "" if amount is None else str(amount)

    return "\n".join(f"{name}={shown(limit['storage_gib'])}/{shown(limit['volumes'])}"
                     for name, limit in quota.storage_by_class().items())


def storage_class_limits(text: str) -> dict[str, dict[str, str | None]]:
    """The text area's lines → the quota API's `storage_by_class` (its validation judges the
    numbers; a line without `=` is a class whose numbers are missing, which it refuses)."""
    limits: dict[str, dict[str, str | None]] = {}
    for line in text.splitlines():
        name, _, amounts = line.strip().partition("=")
        if not name:
            continue
        gib, _, volumes = amounts.partition("/")
        limits[name.strip()] = {"storage_gib": gib.strip() or None,
                                "volumes": volumes.strip() or None}
    return limits


def _row(tenant: Tenant, gpu_types: Iterable[GpuType], usage: dict[int, QuotaUse],
         posted: Mapping[str, str] | None = None) -> dict[str, object]:
    """One tenant's table row: the admin's quota (what the form edits), what is in force where
    adjustments change it, what the cluster's pods use; after a refused inline save it
    carries what was typed."""
    quota = tenant.quota
    figures = quota_figures(tenant, quota=quota, used=usage.get(tenant.pk))
    used = figures.used
    posted = posted or {}
    values = _form_values(quota, posted)
    return {
        "tenant": tenant,
        "quota": quota,
        "figures": figures,
        "values": values,
        "cells": [{"slug": t.slug, "used": used.gpus(t.slug) if used else 0,
                   "limit": posted.get(f"gpu_{t.slug}", figures.nominal.gpus(t.slug)),
                   "in_force": figures.gpus(t.slug),
                   "adjusted": figures.in_force_text(t.slug)}
                  for t in gpu_types],
        "used_total": used.gpus_total if used else 0,
        "used_total_text": equivalents_text(used.gpus_total) if used else "0",
    }


def _form_data(post: Mapping[str, str]) -> dict[str, object]:
    """The page's form fields → the quota API's shape (one validation for both)."""
    data: dict[str, object] = {field: post[field] for field in QUOTA_FIELDS if field in post}
    for field in ("gpu_borrowing_limit", "gpu_lending_limit"):
        if data.get(field) == "":
            data[field] = None  # an empty box: no limit
    if "memory_gb" in data:
        data["memory"] = data.pop("memory_gb")
    by_type = {key.removeprefix("gpu_"): value for key, value in post.items()
               if key.startswith("gpu_") and key not in QUOTA_FIELDS and value != ""}
    if by_type:
        data["gpus_by_type"] = by_type
    if "allow_over_capacity_present" in post:
        data["allow_over_capacity"] = "allow_over_capacity" in post
    if "storage_by_class" in post:
        data["storage_by_class"] = storage_class_limits(post["storage_by_class"])
    return data


@admin_required
def tenant_list(request: SignedInRequest) -> HttpResponse:
    filterset = TenantFilterSet(request.GET or None,
                                queryset=Tenant.objects.select_related("quota").restrict(
                                    request.identity, Action.VIEW).exclude(
                                    state=Tenant.State.DELETED))
    tenants = list(tenants_with_quota_figures(filterset.qs))
    gpu_types = list(GpuType.objects.filter(enabled=True))
    usage, cluster_error = _usage(tenants)
    return render(request, "tenants/tenant_list.html", {
        "filterset": filterset, "gpu_types": gpu_types, "cluster_error": cluster_error,
        "rows": [_row(t, gpu_types, usage) for t in tenants],
        "sort": request.GET.get("ordering", "name"),
    })


@admin_required
@scoped_object(Tenant)
def tenant_quota_row(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    """htmx: one table row, shown (GET) or as an inline form (GET ?edit=1), saved by POST."""
    gpu_types = list(GpuType.objects.filter(enabled=True))
    errors: dict[str, list[str]] = {}
    editing = request.GET.get("edit") == "1"
    if request.method == "POST":
        errors, ok = _save_quota(request, tenant, partial=True)
        editing = not ok
        tenant.refresh_from_db()
    if not request.htmx:
        return redirect("tenants:detail", pk=tenant.pk)
    usage, _ = _usage([tenant])
    return render(request, "tenants/_tenant_row.html", {
        "row": _row(tenant, gpu_types, usage, request.POST if errors else None),
        "gpu_types": gpu_types, "editing": editing, "errors": errors,
    })


def _save_quota(request: SignedInRequest, tenant: Tenant, *, partial: bool
                ) -> tuple[dict[str, list[str]], bool]:
    quota = Quota.objects.restrict(request.identity, Action.CHANGE).get(tenant=tenant)
    try:
        changes = quota_changes_clean(quota=quota, data=_form_data(request.POST), partial=partial)
    except QuotaInvalid as exc:
        return exc.errors, False
    except CapacityUnknown:
        return {"__all__": ["The cluster's capacity cannot be read right now; retry, or "
                            "tick 'allow above cluster capacity'."]}, False
    quota_update(tenant=tenant, acting_user=request.user, changes=changes)
    return {}, True


@admin_required
@scoped_object(Tenant, queryset=lambda tenants: tenants.select_related("quota"))
def tenant_detail(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        errors, ok = _save_quota(request, tenant, partial=True)
        if ok:
            messages.success(request, f"Quota of {tenant.name} saved.")
            return redirect("tenants:detail", pk=tenant.pk)
    members, members_error = [], None
    try:
        client = KeystoneClient()
        members = client.project_members(client.service_system_token().id,
                                         tenant.keystone_project_id)
    except KeystoneError as exc:
        members_error = f"Keystone did not answer ({type(exc).__name__})."
    gpu_types = list(GpuType.objects.filter(enabled=True))
    quota = tenant.quota
    figures = quota_figures(tenant, quota=quota)
    by_type = figures.nominal.gpus_by_type
    # after a refused save the form shows what the admin typed, not the stored values
    posted = request.POST if errors else {}
    values = _form_values(quota, posted)
    return render(request, "tenants/tenant_detail.html", {
        "tenant": tenant, "quota": quota, "values": values, "errors": errors,
        "figures": figures, "cluster_states": tenant_cluster_states(tenant),
        "in_force": [{"slug": t.slug, "nominal": figures.nominal.gpus(t.slug),
                      "in_force": figures.gpus(t.slug)} for t in gpu_types],
        "gpu_limits": [{"type": t, "limit": posted.get(f"gpu_{t.slug}", by_type.get(t.slug, 0))}
                       for t in gpu_types],
        "members": members, "members_error": members_error,
        "departments": Department.objects.all(),
        "audit": AuditRecord.objects.restrict(request.identity, Action.VIEW)
                                    .filter(tenant=tenant)[:50],
        "pod_security": tenant_pod_security(tenant),
        "site_pod_security": settings.PORTAL_POD_SECURITY_ENFORCE,
        "root_templates": list(Template.objects.filter(allow_root=True, enabled=True)),
        "queueing": queueing_shown(),
    })


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE, queryset=_not_deleted)
def tenant_root_templates(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    """The tenant page's "Pod Security" section: may the tenant run templates that may run as
    root (its namespace then enforces "baseline")?"""
    allow = request.POST.get("allow_root_templates") == "on"
    tenant = tenant_root_templates_update(tenant=tenant, acting_user=request.user, allow=allow)
    messages.success(request, f"{tenant.name}'s namespace will enforce Pod Security "
                              f"“{tenant_pod_security(tenant)}”.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE)
def tenant_reconcile_now(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    send_on_commit("tenants.tasks.tenant_reconcile_task", tenant.pk)
    messages.info(request, f"Reconciling {tenant.namespace}; reload in a moment.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE)
def tenant_delete(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    if request.POST.get("confirm") != tenant.name:
        messages.error(request, "Type the tenant's name to confirm the deletion.")
        return redirect("tenants:detail", pk=tenant.pk)
    tenant_mark_deleting(tenant=tenant, acting_user=request.user,
                         reason=f"deleted by {request.user}")
    messages.warning(request, f"{tenant.name} will be deleted after the grace period.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE)
def tenant_restore_view(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    tenant_restore(tenant=tenant, acting_user=request.user)
    messages.success(request, f"{tenant.name} is no longer being deleted.")
    return redirect("tenants:detail", pk=tenant.pk)


# --- the images a tenant may use ----------------------------------------------------------

def _refused_templates(prefixes: list[str]) -> list[Template]:
    """Enabled templates with an image of their own that these prefixes would refuse."""
    return [t for t in Template.objects.filter(enabled=True, custom=False)
            if t.image and not image_allowed(t.image, prefixes)]


@admin_required
@require_http_methods(["GET", "POST"])
@scoped_object(Tenant, Action.CHANGE, queryset=lambda tenants: tenants.exclude(
    state=Tenant.State.DELETED))
def tenant_image_prefixes(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    """The tenant page's "Images" section. A browser without JavaScript posts here and is sent
    back to the tenant page (or, with errors, gets the section on a page of its own)."""
    if request.method == "GET":
        return redirect("tenants:detail", pk=tenant.pk)
    form = ImagePrefixesForm(request.POST, tenant=tenant)
    saved = False
    if form.is_valid():
        tenant = tenant_image_prefixes_update(tenant=tenant, acting_user=request.user,
                                              prefixes=form.cleaned_data["image_prefixes"])
        saved = True
        form = ImagePrefixesForm(tenant=tenant)
    context: dict[str, Any] = {"tenant": tenant, "prefix_form": form, "prefixes_saved": saved,
               "refused_templates": _refused_templates(tenant.image_prefixes) if saved else []}
    if request.htmx:
        # 200 with the errors: htmx swaps in only successful responses
        return render(request, "tenants/_image_prefixes.html", context)
    if saved:
        refused = context["refused_templates"]
        messages.success(request, f"Image registries of {tenant.name} saved." + (
            " Its launches of " + ", ".join(t.name for t in refused) + " will be refused: "
            "their images are outside the list." if refused else ""))
        return redirect("tenants:detail", pk=tenant.pk)
    return render(request, "tenants/tenant_image_prefixes.html", context, status=400)



# --- departments -------------------------------------------------------------------------------

@admin_required
@require_http_methods(["GET", "POST"])
def department_list(request: SignedInRequest) -> HttpResponse:
    """Every department with its projects, and the form that makes one."""
    form = DepartmentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        department = department_create(acting_user=request.user, fields=form.cleaned_data)
        messages.success(request, f"Department {department.name} made.")
        return redirect("tenants:departments")
    return render(request, "tenants/department_list.html", {
        "departments": Department.objects.prefetch_related("tenants", "gpu_caps__gpu_type"),
        "form": form,
    }, status=400 if form.errors else 200)


@admin_required
@require_http_methods(["GET", "POST"])
def department_detail(request: SignedInRequest, pk: int) -> HttpResponse:
    """A department: its caps (in all and per GPU type) as a form, its projects, what they use
    now against the caps (as the admission counts it) and what their quotas in force add up to
    (with Kueue, what they hold of their own below the cap)."""
    department = get_object_or_404(Department, pk=pk)
    form = DepartmentForm(request.POST or None, instance=department)
    if request.method == "POST" and form.is_valid():
        department_update(department=department, acting_user=request.user,
                          changes=form.cleaned_data)
        messages.success(request, f"Department {department.name} saved.")
        return redirect("tenants:department-detail", pk=department.pk)
    if form.errors:
        department.refresh_from_db()  # a refused form left what was typed in the instance
    standing = department_standing(department)
    return render(request, "tenants/department_detail.html", {
        "department": department, "form": form,
        "tenants": department.tenants.exclude(state=Tenant.State.DELETED),
        "types": standing.type_rows(), "total": standing.total(),
        "workloads": standing.used.workloads or 0,
        "queueing": queueing_shown(),
    }, status=400 if form.errors else 200)


@admin_required
@require_POST
def department_delete_view(request: SignedInRequest, pk: int) -> HttpResponse:
    department = get_object_or_404(Department, pk=pk)
    department_delete(department=department, acting_user=request.user)
    messages.success(request, f"Department {department.name} removed; its projects are in none.")
    return redirect("tenants:departments")


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE)
def tenant_department(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    """The tenant page's department: which one the project belongs to, or none."""
    chosen = request.POST.get("department") or ""
    department = (Department.objects.filter(pk=int(chosen)).first()
                  if chosen.isascii() and chosen.isdigit() else None)
    tenant = tenant_department_set(tenant=tenant, acting_user=request.user, department=department)
    messages.success(request, f"{tenant.name} is in "
                              f"{department.name if department else 'no department'}.")
    return redirect("tenants:detail", pk=tenant.pk)
