from __future__ import annotations

from django.db.models import Sum
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import APIRequest
from api.viewsets import TenantScopedAPIView
from workloads.models import Workload

from ..charts import chart_window, workload_gpu_series
from ..forms import GROUP_BY, UsageQueryForm
from ..models import GpuUsageRollup
from ..selectors import report_columns, usage_report_for
from .renderers import UsageCsvRenderer

_ROWS = inline_serializer("UsageRow", many=True, fields={
    "gpu_hours_allocated": serializers.FloatField(),
    "gpu_hours_used": serializers.FloatField(),
    "utilisation_percent": serializers.FloatField(allow_null=True),
    "util_avg": serializers.FloatField(allow_null=True),
    "util_max": serializers.FloatField(allow_null=True),
    "samples": serializers.IntegerField(),
    "workloads": serializers.IntegerField(),
    "storage_gib_days": serializers.FloatField(
        required=False, allow_null=True,
        help_text="GiB-days of storage its volumes held in the period (by tenant: every "
                  "volume of the project; by user: the user's own volumes); only by tenant "
                  "or user, null for one workload's report"),
})
_TOTALS = inline_serializer("UsageTotals", fields={
    "gpu_hours_allocated": serializers.FloatField(),
    "gpu_hours_used": serializers.FloatField(),
    "utilisation_percent": serializers.FloatField(allow_null=True),
    "storage_gib_days": serializers.FloatField(
        allow_null=True, help_text="GiB-days of storage every volume in the report's tenants "
                                   "held in the period (the project's and the users'); null "
                                   "for one workload's report"),
})


class UsageView(APIView):
    """GPU-hours allocated and used (utilisation-weighted) over a time range, grouped, and
    by tenant or user the storage their volumes held, in GiB-days.

    Callers see their current project's usage; admins every tenant's (narrow with `tenant`).
    `?format=csv` answers the same rows as CSV."""

    renderer_classes = [JSONRenderer, UsageCsvRenderer, BrowsableAPIRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("since", str, description="ISO 8601 date or date-time; "
                                                       "default: 30 days before until"),
            OpenApiParameter("until", str, description="ISO 8601 date (inclusive) or date-time "
                                                       "(exclusive); default: now"),
            OpenApiParameter("group_by", str, enum=list(GROUP_BY), default="tenant"),
            OpenApiParameter("tenant", str, description="tenant id or name"),
            OpenApiParameter("workload", int),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        responses=inline_serializer("UsageReport", {
            "since": serializers.DateTimeField(), "until": serializers.DateTimeField(),
            "group_by": serializers.CharField(),
            "columns": serializers.ListField(child=serializers.CharField()),
            "totals": _TOTALS, "results": _ROWS}),
    )
    def get(self, request: APIRequest) -> Response:
        form = UsageQueryForm(request.query_params)
        if not form.is_valid():
            raise exceptions.ValidationError(
                {field: [str(e) for e in errors] for field, errors in form.errors.items()})
        query = form.cleaned_data
        rows, totals = usage_report_for(
            request.identity, tenant=query["tenant"], workload=query["workload"],
            since=query["since"], until=query["until"], group_by=query["group_by"])
        body = {"since": query["since"], "until": query["until"], "group_by": query["group_by"],
                "columns": report_columns(query["group_by"]), "totals": totals,
                "results": rows}
        response = Response(body)
        if getattr(request, "accepted_renderer", None) is not None and \
                request.accepted_renderer.format == "csv":
            name = f"gpu-usage-{query['group_by']}-{query['since']:%Y%m%d}-{query['until']:%Y%m%d}"
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return response


class WorkloadUsageView(TenantScopedAPIView[Workload]):
    """`GET workloads/{id}/usage/`: one workload's GPU use, what its page charts."""

    queryset = Workload.objects.all()

    @extend_schema(
        operation_id="workloads_usage_retrieve",
        parameters=[OpenApiParameter("minutes", int,
                                     description="window: 15, 60, 360, 1440 or 10080 minutes")],
        responses={200: OpenApiTypes.OBJECT})
    def get(self, request: APIRequest, pk: int) -> Response:  # noqa: ARG002 - pk: get_object reads it
        """The workload's GPU use: GPU-hours allocated and used, and its utilisation and
        memory series over the window (what the workload page charts)."""
        workload = self.get_object()  # another tenant's: 404
        totals = GpuUsageRollup.objects.filter(
            workload=workload, granularity=GpuUsageRollup.Granularity.MINUTE,
        ).aggregate(allocated=Sum("gpu_seconds_allocated"), used=Sum("gpu_seconds_used"))
        series = workload_gpu_series(workload,
                                     minutes=chart_window(request.query_params.get("minutes")))
        return Response({
            "gpu_hours_allocated": round((totals["allocated"] or 0) / 3600, 4),
            "gpu_hours_used": round((totals["used"] or 0) / 3600, 4),
            **series,
        })
