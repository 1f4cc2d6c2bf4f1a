from __future__ import annotations

from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from api.permissions import IsPortalAdmin
from audit.models import AuditRecord

from ..filtersets import AuditRecordFilterSet, TenantFilterSet
from ..models import Quota, Tenant
from ..quota_validation import CapacityUnknown
from ..selectors import audit_records_visible, tenants_visible
from ..services import quota_update
from .serializers import AuditRecordSerializer, QuotaSerializer, TenantSerializer


class CapacityUnavailable(exceptions.APIException):
    status_code = 503
    default_code = "cluster_unavailable"
    default_detail = ("The cluster's GPU capacity cannot be read right now, so the quota cannot "
                      "be checked against it. Retry, or set allow_over_capacity.")


class TenantViewSet(viewsets.ReadOnlyModelViewSet):
    """Tenants: the caller's Keystone projects (admins: all)."""

    serializer_class = TenantSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = TenantFilterSet

    queryset = Tenant.objects.none()  # the real one comes from get_queryset

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Tenant.objects.none()
        return tenants_visible(self.request.identity)

    @extend_schema(request=QuotaSerializer, responses=QuotaSerializer)
    @action(detail=True, methods=["get", "put", "patch"])
    def quota(self, request, pk=None):
        tenant = self.get_object()  # another tenant's: 404
        quota = get_object_or_404(Quota, tenant=tenant)
        if request.method == "GET":
            return Response(QuotaSerializer(quota).data)
        if not request.identity.is_admin:
            raise exceptions.PermissionDenied("Only portal administrators may change quotas.")
        serializer = QuotaSerializer(quota, data=request.data, partial=request.method == "PATCH")
        try:
            serializer.is_valid(raise_exception=True)
        except CapacityUnknown as exc:
            raise CapacityUnavailable() from exc
        quota = quota_update(tenant=tenant, acting_user=request.user,
                             changes=serializer.validated_data)
        return Response(QuotaSerializer(quota).data)


class AuditRecordViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The audit trail (admins)."""

    serializer_class = AuditRecordSerializer
    permission_classes = [IsPortalAdmin]
    filter_backends = [DjangoFilterBackend]
    filterset_class = AuditRecordFilterSet

    queryset = AuditRecord.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AuditRecord.objects.none()
        return audit_records_visible(self.request.identity)
