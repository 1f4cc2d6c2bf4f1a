from __future__ import annotations

from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins
from rest_framework.decorators import action
from rest_framework.response import Response

from api.authentication import APIRequest
from api.viewsets import TenantScopedViewSet
from identity.scoping import Action

from ..filtersets import TenantFilterSet
from ..models import Quota, Tenant
from ..quota_validation import CapacityUnknown
from ..services import TenantClustersInvalid, quota_update, tenant_clusters_set
from .serializers import QuotaSerializer, TenantClustersSerializer, TenantSerializer


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
    queryset = Tenant.objects.select_related("quota").prefetch_related("clusters")

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
