from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from api.authentication import APIRequest
from api.permissions import HasProject
from api.viewsets import ID_PATTERN
from identity.scoping import Action
from tenants.authentication import TenantAPIRequest
from tenants.models import Tenant
from tenants.selectors import tenants_reachable

from ..models import ResourceRequest
from ..selectors import record_changeable, record_of, request_decidable_by, requests_visible
from ..services import (
    NotTheAsker,
    OwnRequest,
    RequestRefused,
    record_set,
    request_approve,
    request_change,
    request_create,
    request_deny,
)
from .serializers import (
    DecisionSerializer,
    ProjectRecordSerializer,
    RequestChangeSerializer,
    RequestCreateSerializer,
    RequestSerializer,
)


class ProjectRecordView(generics.GenericAPIView[Tenant]):
    """A project's record (principal investigator, grants, field, the allocation's end): its
    people read it, and the admins of its department with a token of the department's project;
    admins and those department admins change it. Another project's is a 404."""

    serializer_class = ProjectRecordSerializer  # type: ignore[assignment] # it answers a record
    permission_classes = [HasProject]
    request: APIRequest

    def _tenant(self, pk: int) -> Tenant:
        return get_object_or_404(tenants_reachable(self.request.identity)
                                 .select_related("department"), pk=pk)

    def _answer(self, tenant: Tenant) -> Response:
        return Response(ProjectRecordSerializer(
            record_of(tenant), context={"today": timezone.localdate()}).data)

    @extend_schema(responses=ProjectRecordSerializer)
    def get(self, request: APIRequest, pk: int) -> Response:
        return self._answer(self._tenant(pk))

    @extend_schema(request=ProjectRecordSerializer, responses=ProjectRecordSerializer)
    def patch(self, request: APIRequest, pk: int) -> Response:
        tenant = self._tenant(pk)  # another project's: 404
        if not record_changeable(request.identity, tenant):
            raise exceptions.PermissionDenied("Only portal administrators and the admins of the "
                                              "project's department may change its record.")
        serializer = ProjectRecordSerializer(data=request.data, partial=True,
                                             context={"tenant": tenant})
        serializer.is_valid(raise_exception=True)
        record_set(tenant=tenant, acting_user=request.user,
                   changes=dict(serializer.validated_data))
        return self._answer(tenant)


class RequestConflict(exceptions.APIException):
    """409: the request was decided already, or the change it asks cannot be applied now."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "request_decided"


class RequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     viewsets.GenericViewSet[ResourceRequest]):
    """Requests: a project's people see its requests, members and managers ask; admins and the
    admins of the project's department approve or deny them (never their own). Another
    project's is a 404."""

    serializer_class = RequestSerializer
    queryset = ResourceRequest.objects.all()
    lookup_value_regex = ID_PATTERN
    permission_classes = [HasProject]
    http_method_names = ["get", "post", "patch", "head", "options"]
    request: APIRequest

    def get_queryset(self) -> QuerySet[ResourceRequest]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator: no request
            return ResourceRequest.objects.none()
        rows = requests_visible(self.request.identity)
        state = self.request.query_params.get("state")
        if self.action == "list" and state in ResourceRequest.State.values:
            rows = rows.filter(state=state)
        return rows

    @extend_schema(request=RequestCreateSerializer, responses={201: RequestSerializer})
    def create(self, request: TenantAPIRequest, *args: Any, **kwargs: Any) -> Response:
        serializer = RequestCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        wanted = fields.pop("tenant")
        tenants = Tenant.objects.restrict(request.identity, Action.VIEW)
        tenant = (get_object_or_404(tenants, pk=wanted) if wanted is not None
                  else request.tenant)
        if tenant is None:
            raise exceptions.NotFound("Your token's project has no tenant; name one.")
        if not Tenant.objects.permits(request.identity, Action.LAUNCH, tenant):
            raise exceptions.PermissionDenied("Readers cannot ask; members and managers can.")
        made = request_create(tenant=tenant, asker=request.user, fields=fields)
        return Response(RequestSerializer(made).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RequestChangeSerializer, responses=RequestSerializer)
    def partial_update(self, request: APIRequest, *args: Any, **kwargs: Any) -> Response:
        """The asker changes their pending request (its kind stays): the fields given replace
        theirs, the whole checked as when asked. 403 not_the_asker for anyone else, 409
        request_decided once decided; the project's managers and its deciders are told."""
        row = self.get_object()  # another project's: 404
        serializer = RequestChangeSerializer(data=request.data, context={"row": row})
        serializer.is_valid(raise_exception=True)
        try:
            row = request_change(request=row, asker=request.user,
                                 fields=dict(serializer.validated_data))
        except NotTheAsker as exc:
            raise exceptions.PermissionDenied(str(exc), code=exc.code) from None
        except RequestRefused as exc:
            raise RequestConflict(str(exc), code=exc.code) from None
        return Response(RequestSerializer(row).data)

    def _decide(self, request: APIRequest, decide: Any) -> Response:
        row = self.get_object()  # another project's: 404
        if not request_decidable_by(request.identity, row):
            raise exceptions.PermissionDenied("Only portal administrators and the admins of the "
                                              "project's department decide requests.")
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            row = decide(request=row, decider=request.user,
                         note=serializer.validated_data["note"])
        except OwnRequest as exc:
            raise exceptions.PermissionDenied(str(exc), code=exc.code) from None
        except RequestRefused as exc:
            raise RequestConflict(str(exc), code=exc.code) from None
        return Response(RequestSerializer(row).data)

    @extend_schema(request=DecisionSerializer, responses=RequestSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: APIRequest, pk: str | None = None) -> Response:
        """Approve and apply it (409 request_decided once decided; request_not_applicable
        when the change cannot be made now: it stays pending)."""
        return self._decide(request, request_approve)

    @extend_schema(request=DecisionSerializer, responses=RequestSerializer)
    @action(detail=True, methods=["post"])
    def deny(self, request: APIRequest, pk: str | None = None) -> Response:
        return self._decide(request, request_deny)
