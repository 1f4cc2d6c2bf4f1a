"""The calendar's REST API: reservations, maintenance windows, a tenant's allowance, and the
calendar of a GPU type."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import APIRequest
from api.fields import query_digits, query_moment
from api.permissions import HasProject, IsPortalAdmin
from api.viewsets import ID_PATTERN, TenantScopedAPIView, TenantScopedViewSet
from catalogue.models import GpuType
from core.validation import LATEST
from identity.scoping import Action
from tenants.models import Tenant

from ..models import MaintenanceWindow, Reservation, ReservationAllowance
from ..selectors import calendar_data
from ..services import (
    CalendarRefused,
    allowance_set,
    reservation_cancel,
    reservation_create,
    window_cancel,
    window_create,
)
from .serializers import (
    AllowanceSerializer,
    CalendarSerializer,
    ReservationSerializer,
    ReservationWriteSerializer,
    WindowSerializer,
    WindowWriteSerializer,
)

MAX_SPAN = dt.timedelta(days=62)
DEFAULT_SPAN = dt.timedelta(days=14)


class Refused(exceptions.APIException):
    """A booking the calendar refuses as a whole: 409 `overbooked`."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "calendar_refused"


def _refused(exc: CalendarRefused) -> exceptions.APIException:
    """409 overbooked, 403 reservation_allowance (beyond the tenant's allowance)."""
    if exc.status == status.HTTP_403_FORBIDDEN:
        return exceptions.PermissionDenied(str(exc), code=exc.code)
    return Refused(str(exc), code=exc.code)


def _span(request: Request, default_since: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    since = query_moment(request, "since", default_since)
    until = query_moment(request, "until", min(since + DEFAULT_SPAN, LATEST))
    if until <= since or until - since > MAX_SPAN:
        raise exceptions.ValidationError(
            {"until": [f"After `since`, and at most {MAX_SPAN.days} days after it."]})
    return since, until


class ReservationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                         mixins.DestroyModelMixin, TenantScopedViewSet[Reservation]):
    """Reservations: a tenant's people see its own (admins every one; another tenant's is a
    404); admins book for any tenant, managers for theirs within its allowance; its managers
    and admins cancel (DELETE). `?gpu_type=`, `?tenant=` (admins), `?include_past=1`."""

    serializer_class = ReservationSerializer
    queryset = Reservation.objects.select_related("tenant", "gpu_type", "created_by")
    change_actions = frozenset({"destroy"})
    refusal = "Only the project's managers and portal administrators may cancel its reservations."
    request: APIRequest

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        params = self.request.query_params
        if self.action == "list":
            if params.get("gpu_type"):
                queryset = queryset.filter(gpu_type__slug=params["gpu_type"])
            tenant = query_digits(self.request, "tenant")
            if tenant is not None:
                queryset = queryset.filter(tenant_id=tenant)
            if params.get("include_past") not in ("1", "true"):
                now = timezone.now()
                queryset = queryset.filter(cancelled_at__isnull=True).exclude(
                    recurrence="", end__lte=now).exclude(
                    recurrence=Reservation.Recurrence.WEEKLY, until__lte=now - dt.timedelta(days=7))
        return queryset

    def _tenant(self, tenant_id: int | None) -> tuple[Tenant, bool]:
        """The tenant booked for, and whether the booking is within its allowance (a
        manager's) rather than an admin's."""
        identity = self.request.identity
        if identity.is_admin:
            if tenant_id is None:
                tenant = getattr(self.request, "tenant", None)
                if tenant is None:
                    raise exceptions.ValidationError({"tenant": ["Name the tenant to book for."]})
                return tenant, False
            found = Tenant.objects.filter(pk=tenant_id).first()
            if found is None:
                raise exceptions.ValidationError({"tenant": ["No such tenant."]})
            return found, False
        current = getattr(self.request, "tenant", None)
        if current is None or (tenant_id is not None and tenant_id != current.pk):
            raise exceptions.NotFound("No such tenant.")
        if not Tenant.objects.permits(identity, Action.CHANGE, current):
            raise exceptions.PermissionDenied("Only the project's managers and portal "
                                              "administrators may book GPUs.")
        return current, True

    @extend_schema(request=ReservationWriteSerializer, responses={201: ReservationSerializer})
    def create(self, request: APIRequest) -> Response:
        serializer = ReservationWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        tenant, within = self._tenant(fields.pop("tenant"))
        try:
            reservation = reservation_create(tenant=tenant, acting_user=request.user,
                                             fields=fields, within_allowance=within)
        except CalendarRefused as exc:
            raise _refused(exc) from exc
        return Response(ReservationSerializer(reservation).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        reservation_cancel(reservation=self.get_object(), acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MaintenanceWindowViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                               mixins.CreateModelMixin, mixins.DestroyModelMixin,
                               viewsets.GenericViewSet[MaintenanceWindow]):
    """Maintenance windows: everyone signed in sees them (they may be affected); admins announce
    and cancel them (DELETE: a future one is called off, one in progress ends now).
    `?include_past=1` lists the ended and cancelled ones too."""

    serializer_class = WindowSerializer
    queryset = MaintenanceWindow.objects.select_related("gpu_type", "created_by")
    lookup_value_regex = ID_PATTERN
    request: APIRequest

    def get_permissions(self) -> list[Any]:
        if self.action in ("create", "destroy"):
            return [HasProject(), IsPortalAdmin()]
        return [HasProject()]

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        if self.action == "list" and \
                self.request.query_params.get("include_past") not in ("1", "true"):
            queryset = queryset.filter(cancelled_at__isnull=True).exclude(
                state=MaintenanceWindow.State.ENDED)
        return queryset

    @extend_schema(request=WindowWriteSerializer, responses={201: WindowSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WindowWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        window = window_create(acting_user=request.user, fields=dict(serializer.validated_data))
        return Response(WindowSerializer(window).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        window_cancel(window=self.get_object(), acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AllowanceView(TenantScopedAPIView[Tenant]):
    """What a tenant's managers may book themselves: its people read it, admins set it.
    No allowance set: `gpu_hours` 0 (only admins book for the tenant)."""

    queryset = Tenant.objects.all()
    serializer_class = AllowanceSerializer  # type: ignore[assignment] # it answers an allowance
    request: APIRequest

    def _answer(self, tenant: Tenant) -> Response:
        allowance = ReservationAllowance.objects.filter(tenant=tenant).first() \
            or ReservationAllowance(tenant=tenant)
        return Response(AllowanceSerializer(allowance).data)

    @extend_schema(responses=AllowanceSerializer)
    def get(self, request: APIRequest, pk: int) -> Response:
        return self._answer(self.get_object())

    @extend_schema(request=AllowanceSerializer, responses=AllowanceSerializer)
    def put(self, request: APIRequest, pk: int) -> Response:
        tenant = self.get_object()  # another tenant's: 404
        if not ReservationAllowance.objects.permits(request.identity, Action.CHANGE,
                                                    ReservationAllowance(tenant=tenant)):
            raise exceptions.PermissionDenied("Only portal administrators may set allowances.")
        serializer = AllowanceSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        allowance_set(tenant=tenant, acting_user=request.user, **serializer.validated_data)
        return self._answer(tenant)


class CalendarView(APIView):
    """A GPU type's calendar: its capacity, the stretches where what is reserved or in
    maintenance changes (and what is left to book), the reservations (another project's
    without its name and note, except for admins) and the maintenance windows."""

    request: APIRequest

    @extend_schema(responses=CalendarSerializer, parameters=[
        OpenApiParameter("gpu_type", str, required=True),
        OpenApiParameter("since", OpenApiTypes.DATETIME,
                         description="ISO 8601 with a zone, 2000-01-01 to 2100-01-01 "
                                     "(default: now)"),
        OpenApiParameter("until", OpenApiTypes.DATETIME,
                         description="ISO 8601 with a zone (default: since + 14 days; at most "
                                     "62 days after since)")])
    def get(self, request: APIRequest) -> Response:
        slug = request.query_params.get("gpu_type", "")
        gpu_type = GpuType.objects.filter(slug=slug, enabled=True).first()
        if gpu_type is None:
            raise exceptions.ValidationError({"gpu_type": ["No such GPU type."]})
        since, until = _span(request, timezone.now().replace(microsecond=0))
        identity = request.identity

        def shows(reservation: Reservation) -> bool:
            return Reservation.objects.permits(identity, Action.VIEW, reservation)

        return Response(CalendarSerializer(calendar_data(gpu_type, since, until,
                                                         shows=shows)).data)
