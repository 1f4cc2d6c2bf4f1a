"""The researcher's home page: a small dashboard of the current project."""

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render

from identity.access import project_required
from identity.scoping import Action
from tenants.middleware import ProjectRequest
from workloads.models import Workload
from workloads.selectors import gpu_availability


@project_required
def home(request: ProjectRequest) -> HttpResponse:
    identity, tenant = request.identity, request.tenant
    context: dict[str, Any] = {"tenant": tenant}
    if tenant is not None:
        project_workloads = Workload.objects.restrict(identity, Action.VIEW).filter(tenant=tenant)
        active = project_workloads.filter(state__in=Workload.ACTIVE_STATES)
        # the quota use comes from the database (what admission counts): no cluster call
        gpu_rows, _ = gpu_availability(tenant, tenant.quota, ask_cluster=False)
        context.update(
            my_active=list(active.filter(owner=request.user)[:20]),
            project_active_count=active.count(),
            project_count=project_workloads.count(),
            gpu_rows=gpu_rows,
            gpus_used=sum(row.quota_used for row in gpu_rows),
            # in force, as each type's (tenants.selectors.quota_figures)
            gpus_limit=gpu_rows[0].total_limit if gpu_rows else tenant.quota.gpus_total,
        )
    return render(request, "portal/home.html", context)
