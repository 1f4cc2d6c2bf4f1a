"""The admin's page for a tenant's service access, a section of the tenant page
(templates/access/_tenant_service_access.html): whether its users may SSH into its workloads."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from identity.access import SignedInRequest, admin_required, scoped_object
from identity.scoping import Action
from tenants.models import Tenant

from .services import service_access_update


@admin_required
@require_POST
@scoped_object(Tenant, Action.CHANGE, queryset=lambda tenants: tenants.exclude(
    state=Tenant.State.DELETED))
def tenant_ssh(request: SignedInRequest, tenant: Tenant) -> HttpResponse:
    """Turn SSH into the tenant's workloads on or off (audited as tenant.service_access)."""
    enabled = request.POST.get("ssh_enabled") == "on"
    service_access_update(tenant=tenant, actor=request.user, ssh_enabled=enabled)
    messages.success(request, f"SSH into {tenant.name}'s workloads is "
                              f"{'on' if enabled else 'off'}." + (
                                  "" if enabled else " Open sessions end at their server's next "
                                                     "check, within a minute."))
    return redirect("tenants:detail", pk=tenant.pk)
