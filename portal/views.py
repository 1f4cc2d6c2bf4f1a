"""The researcher's home page."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from tenants.models import Tenant


@login_required
def home(request):
    identity = request.identity
    if identity is None or identity.project is None:
        return render(request, "portal/no_projects.html", status=200)
    tenant = Tenant.objects.filter(keystone_project_id=identity.project.id).first()
    return render(request, "portal/home.html", {"tenant": tenant})
