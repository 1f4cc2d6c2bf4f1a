from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from api.authentication import APIRequest
from api.permissions import HasProject
from api.viewsets import ID_PATTERN, TenantScopedViewSet
from identity.scoping import Action

from ..filtersets import TenantFilterSet
from ..models import Department, Quota, Tenant
from ..quota_validation import CapacityUnknown
from ..services import (
    TenantClustersInvalid,
    department_create,
    department_delete,
    department_update,
    quota_update,
    tenant_clusters_set,
    tenant_department_set,
)
from .serializers import (
    DepartmentDetailSerializer,
    DepartmentSerializer,
    QuotaSerializer,
    TenantChangeSerializer,
    TenantClustersSerializer,
    TenantSerializer,
)

ADMINS_ONLY = "Only portal administrators may change departments."


class CapacityUnavailable(exceptions.APIException):
    status_code = 503
    default_code = "cluster_unavailable"
    default_detail = ("The cluster's GPU capacity cannot be read right now, so the quota cannot "
                      "be checked against it. Retry, or set allow_over_capacity.")


class TenantViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    TenantScopedViewSet[Tenant]):
    """Tenants: the caller's current project's (admins: all)."""

    serializer_class = TenantSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = TenantFilterSet
    queryset = Tenant.objects.select_related("quota", "department").prefetch_related("clusters")

    @extend_schema(request=TenantClustersSerializer, responses=TenantClustersSerializer)
    @action(detail=True, methods=["get", "put"])
    def clusters(self, request: APIRequest, pk: str | None = None) -> Response:
        """The clusters the tenant's workloads may run on (admins set them)."""
        tenant = self.get_object()  # another tenant's: 404
        if request.method == "PUT":
            if not request.identity.is_admin:
                raise exceptions.PermissionDenied("Only portal administrators limit a "
                                                  "project's clusters.")
            body = TenantClustersSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            try:
                tenant = tenant_clusters_set(tenant=tenant, acting_user=request.user,
                                             names=body.validated_data["clusters"])
            except TenantClustersInvalid as exc:
                raise exceptions.ValidationError(exc.errors) from exc
        names = sorted(tenant.clusters.values_list("name", flat=True))
        return Response(TenantClustersSerializer({"clusters": names}).data)

    @extend_schema(request=TenantChangeSerializer, responses=TenantSerializer)
    def partial_update(self, request: APIRequest, pk: str | None = None) -> Response:
        """Put the project in a department, or in none (admins)."""
        tenant = self.get_object()  # another tenant's: 404
        if not request.identity.is_admin:
            raise exceptions.PermissionDenied("Only portal administrators may move a project "
                                              "between departments.")
        serializer = TenantChangeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = tenant_department_set(tenant=tenant, acting_user=request.user,
                                       department=serializer.validated_data["department"])
        return Response(TenantSerializer(tenant).data)

    @extend_schema(request=QuotaSerializer, responses=QuotaSerializer)
    @action(detail=True, methods=["get", "put", "patch"])
    def quota(self, request: APIRequest, pk: str | None = None) -> Response:
        tenant = self.get_object()  # another tenant's: 404
        quota = get_object_or_404(Quota.objects.restrict(request.identity, Action.VIEW)
                                  .select_related("tenant"), tenant=tenant)
        if request.method == "GET":
            return Response(QuotaSerializer(quota).data)
        if not Quota.objects.permits(request.identity, Action.CHANGE, quota):
            raise exceptions.PermissionDenied("Only portal administrators may change quotas.")
        serializer = QuotaSerializer(quota, data=request.data, partial=request.method == "PATCH")
        try:
            serializer.is_valid(raise_exception=True)
        except CapacityUnknown as exc:
            raise CapacityUnavailable() from exc
        quota = quota_update(tenant=tenant, acting_user=request.user,
                             changes=serializer.validated_data)
        return Response(QuotaSerializer(quota).data)


class DepartmentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        viewsets.GenericViewSet[Department]):
    """Departments above projects: admins see and change every one; a department's admins (the
    managers of its Keystone project) see theirs, a project's people its department. Another's
    is a 404."""

    serializer_class = DepartmentSerializer
    queryset = Department.objects.all()
    lookup_value_regex = ID_PATTERN
    permission_classes = [HasProject]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    request: APIRequest

    def get_queryset(self) -> QuerySet[Department]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator: no request
            return Department.objects.none()
        return Department.objects.prefetch_related("tenants", "gpu_caps__gpu_type").restrict(
            self.request.identity)

    def _admin(self) -> None:
        if not self.request.identity.is_admin:
            raise exceptions.PermissionDenied(ADMINS_ONLY)

    def get_serializer_class(self) -> type[DepartmentSerializer]:
        """One department comes with `use`: what its projects use now (per GPU type in units,
        in all in GPU-equivalents) against its caps, their quotas together and what is left
        (a list leaves it out: it is read per department)."""
        return DepartmentDetailSerializer if self.action == "retrieve" else DepartmentSerializer

    @extend_schema(request=DepartmentSerializer, responses={201: DepartmentSerializer})
    def create(self, request: APIRequest, *args: Any, **kwargs: Any) -> Response:
        self._admin()
        serializer = DepartmentSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        department = department_create(acting_user=request.user,
                                       fields=dict(serializer.validated_data))
        return Response(DepartmentSerializer(department).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=DepartmentSerializer, responses=DepartmentSerializer)
    def partial_update(self, request: APIRequest, *args: Any, **kwargs: Any) -> Response:
        department = self.get_object()  # one the caller does not see: 404
        self._admin()
        serializer = DepartmentSerializer(department, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        department = department_update(department=department, acting_user=request.user,
                                       changes=dict(serializer.validated_data))
        return Response(DepartmentSerializer(department).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: APIRequest, *args: Any, **kwargs: Any) -> Response:
        department = self.get_object()
        self._admin()
        department_delete(department=department, acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
