"""The admin's pages for tenants: table with inline quota editing, detail, audit trail."""

from __future__ import annotations

import functools
import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework.exceptions import ValidationError

from portal.cluster.capacity import gpus_in_use_by_namespace
from portal.keystone.client import KeystoneClient, KeystoneError
from portal.kube.client import KubeError
from portal.queueing.services import queueing_shown
from portal.workloads.models import GpuType, Template

from .filtersets import AuditRecordFilterSet, TenantFilterSet
from .models import Quota, Tenant
from .quota_validation import CapacityUnknown, clean_quota_changes
from .selectors import audit_records_visible, tenant_pod_security, tenants_visible
from .services import (
    QUOTA_FIELDS,
    quota_update,
    tenant_mark_deleting,
    tenant_restore,
    tenant_root_templates_update,
)

log = logging.getLogger(__name__)


def admin_required(view):
    @login_required
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        identity = getattr(request, "identity", None)
        if identity is None or not identity.is_admin:
            raise PermissionDenied("Only portal administrators may open this page.")
        return view(request, *args, **kwargs)

    return wrapper


def _usage(tenants) -> tuple[dict[str, dict[str, int]], str | None]:
    """GPUs in use per namespace from the cluster; (usage, error message or None)."""
    try:
        return gpus_in_use_by_namespace({t.namespace for t in tenants}), None
    except KubeError as exc:
        log.warning("cluster unreachable for the tenants page: %s", exc)
        return {}, "The cluster is unreachable: GPUs in use are not shown."


def _form_values(quota: Quota, posted) -> dict:
    """The quota form's values: after a refused save what was typed, else what is stored."""
    values = {field: posted.get(field, getattr(quota, field)) for field in QUOTA_FIELDS}
    if posted:
        values["allow_over_capacity"] = "allow_over_capacity" in posted
    return values


def _row(tenant: Tenant, gpu_types, usage: dict[str, dict[str, int]], posted=None) -> dict:
    """One tenant's table row; after a refused inline save it carries what was typed."""
    quota = tenant.quota
    by_type = quota.gpus_by_type()
    used = usage.get(tenant.namespace, {})
    posted = posted or {}
    values = _form_values(quota, posted)
    return {
        "tenant": tenant,
        "quota": quota,
        "values": values,
        "cells": [{"slug": t.slug, "used": used.get(t.slug, 0),
                   "limit": posted.get(f"gpu_{t.slug}", by_type.get(t.slug, 0))}
                  for t in gpu_types],
        "used_total": sum(used.values()),
    }


def _form_data(post) -> dict:
    """The page's form fields → the quota API's shape (one validation for both)."""
    data = {field: post[field] for field in QUOTA_FIELDS if field in post}
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
    return data


def _flat_errors(detail) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {key: [str(v) for v in (value if isinstance(value, list) else [value])]
                for key, value in detail.items()}
    return {"__all__": [str(v) for v in detail]}


@admin_required
def tenant_list(request: HttpRequest) -> HttpResponse:
    filterset = TenantFilterSet(request.GET or None,
                                queryset=tenants_visible(request.identity).exclude(
                                    state=Tenant.State.DELETED))
    tenants = list(filterset.qs.prefetch_related("quota__gpu_limits__gpu_type"))
    gpu_types = list(GpuType.objects.filter(enabled=True))
    usage, cluster_error = _usage(tenants)
    return render(request, "tenants/tenant_list.html", {
        "filterset": filterset, "gpu_types": gpu_types, "cluster_error": cluster_error,
        "rows": [_row(t, gpu_types, usage) for t in tenants],
        "sort": request.GET.get("ordering", "name"),
    })


@admin_required
def tenant_quota_row(request: HttpRequest, pk: int) -> HttpResponse:
    """htmx: one table row, shown (GET) or as an inline form (GET ?edit=1), saved by POST."""
    tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
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


def _save_quota(request: HttpRequest, tenant: Tenant, *, partial: bool
                ) -> tuple[dict[str, list[str]], bool]:
    quota = Quota.objects.get(tenant=tenant)
    try:
        changes = clean_quota_changes(quota, _form_data(request.POST), partial=partial)
    except ValidationError as exc:
        return _flat_errors(exc.detail), False
    except CapacityUnknown:
        return {"__all__": ["The cluster's capacity cannot be read right now; retry, or "
                            "tick 'allow above cluster capacity'."]}, False
    quota_update(tenant=tenant, acting_user=request.user, changes=changes)
    return {}, True


@admin_required
def tenant_detail(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
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
    by_type = quota.gpus_by_type()
    # after a refused save the form shows what the admin typed, not the stored values
    posted = request.POST if errors else {}
    values = _form_values(quota, posted)
    return render(request, "tenants/tenant_detail.html", {
        "tenant": tenant, "quota": quota, "values": values, "errors": errors,
        "gpu_limits": [{"type": t, "limit": posted.get(f"gpu_{t.slug}", by_type.get(t.slug, 0))}
                       for t in gpu_types],
        "members": members, "members_error": members_error,
        "audit": audit_records_visible(request.identity).filter(tenant=tenant)[:50],
        "pod_security": tenant_pod_security(tenant),
        "site_pod_security": settings.PORTAL_POD_SECURITY_ENFORCE,
        "root_templates": list(Template.objects.filter(allow_root=True, enabled=True)),
        "queueing": queueing_shown(),
    })


@admin_required
@require_POST
def tenant_root_templates(request: HttpRequest, pk: int) -> HttpResponse:
    """The tenant page's "Pod Security" section: may the tenant run templates that may run as
    root (its namespace then enforces "baseline")?"""
    tenant = get_object_or_404(tenants_visible(request.identity).exclude(
        state=Tenant.State.DELETED), pk=pk)
    allow = request.POST.get("allow_root_templates") == "on"
    tenant = tenant_root_templates_update(tenant=tenant, acting_user=request.user, allow=allow)
    messages.success(request, f"{tenant.name}'s namespace will enforce Pod Security "
                              f"“{tenant_pod_security(tenant)}”.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
def tenant_reconcile_now(request: HttpRequest, pk: int) -> HttpResponse:
    from .tasks import tenant_reconcile_task

    tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
    tenant_reconcile_task.delay(tenant.pk)
    messages.info(request, f"Reconciling {tenant.namespace}; reload in a moment.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
def tenant_delete(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
    if request.POST.get("confirm") != tenant.name:
        messages.error(request, "Type the tenant's name to confirm the deletion.")
        return redirect("tenants:detail", pk=tenant.pk)
    tenant_mark_deleting(tenant=tenant, acting_user=request.user,
                         reason=f"deleted by {request.user.username}")
    messages.warning(request, f"{tenant.name} will be deleted after the grace period.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
@require_POST
def tenant_restore_view(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
    tenant_restore(tenant=tenant, acting_user=request.user)
    messages.success(request, f"{tenant.name} is no longer being deleted.")
    return redirect("tenants:detail", pk=tenant.pk)


@admin_required
def audit_list(request: HttpRequest) -> HttpResponse:
    filterset = AuditRecordFilterSet(request.GET or None,
                                     queryset=audit_records_visible(request.identity))
    page = Paginator(filterset.qs, 50).get_page(request.GET.get("page"))
    return render(request, "tenants/audit_list.html", {
        "filterset": filterset, "page": page,
        "tenants": tenants_visible(request.identity).select_related(None).only("pk", "name"),
    })
