from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import APIRequest
from api.permissions import HasProject
from core.validation import Refused, ascii_digits

from ..costing import GROUPINGS
from ..models import MonthClose
from ..selectors import NoReports, price_sheets, sheet_in_force, usage_report
from ..services import MonthRefused, month_close, month_reopen, prices_set
from ..validation import month, reason
from .renderers import ReportCsvRenderer
from .serializers import (
    MonthCloseRequestSerializer,
    MonthCloseSerializer,
    MonthlyReportSerializer,
    MonthReopenRequestSerializer,
    MonthReopenSerializer,
    PricesSerializer,
    PricesWriteSerializer,
)


def _admin_only(request: APIRequest, what: str) -> None:
    if request.identity is None or not request.identity.is_admin:
        raise exceptions.PermissionDenied(f"Only portal administrators may {what}.")


class PricesView(APIView):
    """The site's prices: per GPU type and hour (per GPU-equivalent for a shared type),
    optionally per CPU-hour and per GiB-month of storage, each sheet in force from its day
    until the next one's. Every signed-in caller reads them (what a launch will cost is no
    project's secret); admins write them."""

    permission_classes = [HasProject]

    def _answer(self) -> Response:
        body = {"currency": settings.PORTAL_BILLING_CURRENCY, "in_force": sheet_in_force(),
                "sheets": list(price_sheets())}
        return Response(PricesSerializer(body).data)

    @extend_schema(responses=PricesSerializer)
    def get(self, request: APIRequest) -> Response:
        return self._answer()

    @extend_schema(request=PricesWriteSerializer, responses=PricesSerializer)
    def put(self, request: APIRequest) -> Response:
        """Set the prices from a day on (admins; audited prices.set, before → after)."""
        _admin_only(request, "set prices")
        serializer = PricesWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        prices_set(acting_user=request.user, **serializer.validated_data)
        return self._answer()


class MonthConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "month_refused"


class MonthsView(APIView):
    """Closed months (admins): a closed month's reports read its frozen statement."""

    permission_classes = [HasProject]

    @extend_schema(responses=MonthCloseSerializer(many=True))
    def get(self, request: APIRequest) -> Response:
        _admin_only(request, "list closed months")
        rows = MonthClose.objects.select_related("closed_by")
        return Response(MonthCloseSerializer(rows, many=True).data)  # type: ignore[arg-type]

    @extend_schema(request=MonthCloseRequestSerializer, responses={201: MonthCloseSerializer})
    def post(self, request: APIRequest) -> Response:
        """Close a month that is over: its statement frozen (409 month_not_over,
        month_closed)."""
        _admin_only(request, "close a month")
        serializer = MonthCloseRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            wanted = month(serializer.validated_data["period"])
        except Refused as exc:
            raise exceptions.ValidationError({"period": [str(exc)]}) from None
        try:
            closed = month_close(month=wanted, acting_user=request.user)
        except MonthRefused as exc:
            raise MonthConflict(str(exc), code=exc.code) from None
        return Response(MonthCloseSerializer(closed).data, status=status.HTTP_201_CREATED)


class MonthReopenView(APIView):
    """A closed month opened again (admins)."""

    permission_classes = [HasProject]

    @extend_schema(request=MonthReopenRequestSerializer, responses=MonthReopenSerializer)
    def post(self, request: APIRequest) -> Response:
        """Open a closed month again, with a reason: its frozen statement dropped, its reports
        worked out afresh until it is closed again (the beat leaves it to an admin). 409
        month_running for the month now running, month_not_closed for one not closed; audited
        month.reopen."""
        _admin_only(request, "reopen a month")
        serializer = MonthReopenRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        errors: dict[str, list[str]] = {}
        try:
            wanted = month(serializer.validated_data["period"])
        except Refused as exc:
            errors["period"] = [str(exc)]
        try:
            why = reason(serializer.validated_data["reason"])
        except Refused as exc:
            errors["reason"] = [str(exc)]
        if errors:
            raise exceptions.ValidationError(errors)
        try:
            reopened = month_reopen(month=wanted, acting_user=request.user, reason=why)
        except MonthRefused as exc:
            raise MonthConflict(str(exc), code=exc.code) from None
        return Response(MonthReopenSerializer(reopened).data)


class UsageReportView(APIView):
    """A month's GPU-hours (by GPU type), CPU-hours, storage GiB-months and cost per
    department, project, principal investigator or grant. Admins see every project, a
    department's admins its projects, managers their project; readers and members 403. A
    closed month's figures are its frozen statement's, an open month's are worked out now.
    `?format=csv` answers the same as CSV (a row per group, then the totals)."""

    permission_classes = [HasProject]
    renderer_classes = [JSONRenderer, ReportCsvRenderer, BrowsableAPIRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("period", str, description="YYYY-MM; default: this month"),
            OpenApiParameter("group_by", str, enum=list(GROUPINGS), default="department"),
            OpenApiParameter("tenant", str, description="one project's, by tenant id"),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        responses=MonthlyReportSerializer)
    def get(self, request: APIRequest) -> Response:
        params = request.query_params
        errors: dict[str, list[str]] = {}
        period = params.get("period") or f"{timezone.localdate():%Y-%m}"
        try:
            wanted = month(period)
        except Refused as exc:
            errors["period"] = [str(exc)]
        group_by = params.get("group_by") or "department"
        if group_by not in GROUPINGS:
            errors["group_by"] = [f"One of {', '.join(GROUPINGS)} is required."]
        tenant = params.get("tenant") or None
        if tenant is not None and not (ascii_digits(tenant) and len(tenant) <= 18):
            errors["tenant"] = ["A tenant id is required."]
        if errors:
            raise exceptions.ValidationError(errors)
        try:
            report = usage_report(request.identity, month=wanted, group_by=group_by,
                                  tenant=int(tenant) if tenant is not None else None)
        except NoReports as exc:
            raise exceptions.PermissionDenied(str(exc)) from None
        body = MonthlyReportSerializer({
            "period": report.period, "group_by": group_by, "closed": report.closed is not None,
            "closed_at": report.closed.closed_at if report.closed is not None else None,
            "currency": report.currency, "columns": report.columns, "totals": report.totals,
            "results": report.rows}).data
        response = Response(body)
        if getattr(request, "accepted_renderer", None) is not None and \
                request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = (f'attachment; filename="gpu-report-{group_by}-'
                                               f'{report.period}.csv"')
        return response
