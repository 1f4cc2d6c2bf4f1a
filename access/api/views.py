"""`GET|PATCH /api/v1/tenants/{id}/service-access/`: who of a project may open its service
workloads (managers and admins change it) and whether the project may make one public (admins
only). Another tenant's id is a 404, as everywhere."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import APIRequest
from api.viewsets import TenantScopedAPIView
from tenants.models import Tenant

from ..models import TenantServiceAccess, WorkloadAccess
from ..services import service_access_update, tenant_service_access
from ..ssh import report_token_client
from ..ssh_services import ssh_session_report
from .serializers import ServiceAccessSerializer, SSHReportSerializer


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


class WorkloadReportAuthentication(BaseAuthentication):
    """A workload's SSH server: `Authorization: Bearer <client id>.<mac>` (its report token,
    access/ssh.py), and nothing else: no Keystone token, no session, no CSRF."""

    def authenticate(self, request: Request) -> tuple[AnonymousUser, Any]:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise exceptions.NotAuthenticated("A workload's report token is required.")
        client_id = report_token_client(token.strip())
        access = (WorkloadAccess.objects.select_related("workload__tenant")
                  .filter(application__client_id=client_id).first() if client_id else None)
        if access is None:
            raise exceptions.AuthenticationFailed("That is not a workload's report token.")
        return AnonymousUser(), access.workload

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="gpu-portal-ssh-reports"'


class HasWorkloadToken(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return request.auth is not None


class SSHSessionReportView(APIView):
    """`POST /api/v1/ssh-sessions/`: a workload's SSH server reports a session's start (the
    answer says whether it may go on), the open sessions to check (the answer names those that
    must end: the user lost access, SSH was turned off, the workload stopped) and a session's
    end. Only the workload's own server, by its report token."""

    authentication_classes = [WorkloadReportAuthentication]
    permission_classes = [HasWorkloadToken]
    throttle_classes: list[type] = []  # one request per server every check interval

    @extend_schema(request=SSHReportSerializer, responses={200: dict})
    def post(self, request: Request) -> Response:
        serializer = SSHReportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        answer = ssh_session_report(workload=request.auth, event=data["event"], payload=data)
        return Response(answer)
