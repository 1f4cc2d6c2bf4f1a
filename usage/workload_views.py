"""One workload's GPU usage on its page: the chart's JSON, "I still need it", and the admin's
exemption from idle culling. Every lookup is a `scoped_object`: another tenant's workload is a
404."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.redirects import safe_redirect_target
from identity.access import admin_required, project_required, scoped_object
from identity.scoping import Action
from workloads.models import Workload

from .charts import chart_window, workload_gpu_series
from .culling import IdleExtendRefused, workload_cull_exempt_set, workload_idle_extend


@project_required
@require_GET
@scoped_object(Workload)
def workload_gpu_usage(request: HttpRequest, workload: Workload) -> JsonResponse:
    """The chart's series (`?minutes=` one of charts.WINDOWS_MINUTES)."""
    series = workload_gpu_series(workload, minutes=chart_window(request.GET.get("minutes")))
    response = JsonResponse(series)
    response["Cache-Control"] = "no-store"
    return response


@project_required
@require_POST
@scoped_object(Workload, Action.CHANGE)
def workload_still_needed(request: HttpRequest, workload: Workload) -> HttpResponse:
    """"I still need it": withdraw the idle warning; the idle period starts again."""
    try:
        workload_idle_extend(workload=workload, user=request.user)
    except IdleExtendRefused as exc:
        messages.info(request, str(exc))
    else:
        messages.success(request, f"{workload.name} is kept: the idle warning is withdrawn.")
    return redirect(reverse("workloads:detail", args=[workload.pk]))


@admin_required
@require_POST
@scoped_object(Workload, Action.CHANGE)
def workload_cull_exempt(request: HttpRequest, workload: Workload) -> HttpResponse:
    """An admin exempts a workload from idle culling (exempt=1) or ends it (exempt=0)."""
    exempt = request.POST.get("exempt") == "1"
    workload_cull_exempt_set(workload=workload, exempt=exempt, acting_user=request.user,
                             note=request.POST.get("note", "").strip())
    messages.success(request, f"{workload.name} is {'now' if exempt else 'no longer'} exempt "
                              "from idle culling.")
    return redirect(safe_redirect_target(request, request.POST.get("next"))
                    or reverse("workloads:detail", args=[workload.pk]))
