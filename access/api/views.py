"""`GET|PATCH /api/v1/tenants/{id}/service-access/`: who of a project may open its service
workloads (managers and admins change it) and whether the project may make one public (admins
only). Another tenant's id is a 404, as everywhere."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from api.authentication import APIRequest
from api.viewsets import TenantScopedAPIView
from tenants.models import Tenant

from ..models import TenantServiceAccess
from ..services import service_access_update, tenant_service_access
from .serializers import ServiceAccessSerializer


def _shape(rule: TenantServiceAccess) -> dict[str, object]:
    return {"who": rule.who, "allow_public": rule.allow_public, "ssh_enabled": rule.ssh_enabled}


class ServiceAccessView(TenantScopedAPIView[Tenant]):
    """The tenant comes from TenantScopedAPIView: another tenant's is a 404; a PATCH is for
    those who may change the tenant (its managers, admins), else 403."""

    queryset = Tenant.objects.all()
    change_actions = frozenset({"patch"})
    refusal = ("Only the project's managers and portal administrators may change who opens "
               "its workloads.")

    @extend_schema(responses=ServiceAccessSerializer)
    def get(self, request: APIRequest, pk: int) -> Response:
        return Response(_shape(tenant_service_access(self.get_object())))

    @extend_schema(request=ServiceAccessSerializer, responses=ServiceAccessSerializer)
    def patch(self, request: APIRequest, pk: int) -> Response:
        tenant = self.get_object()
        serializer = ServiceAccessSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "allow_public" in data and not request.identity.is_admin:
            raise exceptions.PermissionDenied("Only portal administrators may let a project "
                                              "open workloads to everyone.")
        if "ssh_enabled" in data and not request.identity.is_admin:
            raise exceptions.PermissionDenied("Only portal administrators may turn SSH on or "
                                              "off for a project.")
        rule = service_access_update(tenant=tenant, actor=request.user, who=data.get("who"),
                                     allow_public=data.get("allow_public"),
                                     ssh_enabled=data.get("ssh_enabled"))
        return Response(_shape(rule))
