"""The researcher's home page: a small dashboard of the current project."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from portal.workloads.models import Workload
from portal.workloads.selectors import workloads_visible
from portal.workloads.views import gpu_availability
from tenants.models import Tenant


@login_required
def home(request):
    identity = request.identity
    if identity is None or identity.project is None:
        return render(request, "portal/no_projects.html", status=200)
    tenant = Tenant.objects.select_related("quota").filter(
        keystone_project_id=identity.project.id).first()
    context = {"tenant": tenant}
    if tenant is not None:
        project_workloads = workloads_visible(identity).filter(tenant=tenant)
        active = project_workloads.filter(state__in=Workload.ACTIVE_STATES)
        # the quota use comes from the database (what admission counts): no cluster call
        gpu_rows, _ = gpu_availability(tenant, tenant.quota, ask_cluster=False)
        context.update(
            my_active=list(active.filter(owner=request.user)[:20]),
            project_active_count=active.count(),
            project_count=project_workloads.count(),
            gpu_rows=gpu_rows,
            gpus_used=sum(row.quota_used for row in gpu_rows),
        )
    return render(request, "portal/home.html", context)
