"""`GET|PATCH /api/v1/tenants/{id}/service-access/`: who of a project may open its service
workloads (managers and admins change it) and whether the project may make one public (admins
only). Another tenant's id is a 404, as everywhere."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, views
from rest_framework.response import Response

from portal.keystone.roles import PortalRole
from tenants.selectors import tenants_visible

from .serializers import ServiceAccessSerializer
from .services import service_access_update, tenant_service_access


def _shape(rule) -> dict[str, object]:
    return {"who": rule.who, "allow_public": rule.allow_public}


class ServiceAccessView(views.APIView):
    @extend_schema(responses=ServiceAccessSerializer)
    def get(self, request, pk: int):
        tenant = get_object_or_404(tenants_visible(request.identity), pk=pk)
        return Response(_shape(tenant_service_access(tenant)))

    @extend_schema(request=ServiceAccessSerializer, responses=ServiceAccessSerializer)
    def patch(self, request, pk: int):
        identity = request.identity
        tenant = get_object_or_404(tenants_visible(identity), pk=pk)
        serializer = ServiceAccessSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        manages = identity.is_admin or (
            identity.project is not None and identity.project.id == tenant.keystone_project_id
            and identity.role is not None and identity.role >= PortalRole.MANAGER)
        if not manages:
            raise exceptions.PermissionDenied("Only the project's managers and portal "
                                              "administrators may change who opens its "
                                              "workloads.")
        if "allow_public" in data and not identity.is_admin:
            raise exceptions.PermissionDenied("Only portal administrators may let a project "
                                              "open workloads to everyone.")
        rule = service_access_update(tenant=tenant, actor=request.user, who=data.get("who"),
                                     allow_public=data.get("allow_public"))
        return Response(_shape(rule))
