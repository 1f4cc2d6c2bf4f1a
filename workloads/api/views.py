from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from access.api.serializers import (
    SSHCertificateRequestSerializer,
    SSHCertificateSerializer,
    SSHReportSerializer,
    WorkloadTokenSerializer,
)
from access.services import AccessRefused
from access.ssh import KeyRefused, report_token_client
from api.errors import Category
from api.fields import query_digits, query_number
from api.viewsets import TenantScopedViewSet
from identity.scoping import Action
from kube.client import KubeError
from tenants.authentication import TenantAPIRequest
from tenants.models import Quota, Tenant

from ..access import workload_token_issue
from ..advice import launch_advice, launch_context, launch_pull_check, pull_advice
from ..filtersets import WorkloadFilterSet
from ..logs import RankUnknown, redact, workload_logs, workload_redact
from ..models import Workload, WorkloadAccess
from ..selectors import tenant_gpu_reads, workload_may_see_secrets
from ..services import (
    AddressesExhausted,
    AdmissionRefused,
    IdempotencyKeyReused,
    launch_fingerprint,
    workload_delete,
    workload_launch,
    workload_stop,
)
from ..ssh_services import SSHRefused, ssh_certificate_issue, ssh_session_report
from .serializers import (
    LaunchCheckSerializer,
    LaunchSerializer,
    WorkloadEventSerializer,
    WorkloadSerializer,
)


class QuotaExceeded(exceptions.PermissionDenied):
    """403 with the admission refusal's own code (quota_exceeded, budget_exhausted,
    maintenance_window …): every one of them in the category `admission`."""

    default_code = "quota_exceeded"
    category = Category.ADMISSION


class NoAddressFree(exceptions.APIException):
    """409: the cluster's state (its address pool) refuses the launch now, not the quota."""

    status_code = status.HTTP_409_CONFLICT
    default_code = AddressesExhausted.code
    category = Category.ADMISSION


class IdempotencyConflict(exceptions.APIException):
    """422, as payment APIs answer a key reused with other parameters."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = IdempotencyKeyReused.code
    default_detail = "This Idempotency-Key was used for another request."
    category = Category.CONFLICT


class ClusterUnavailable(exceptions.APIException):
    status_code = 503
    default_code = "cluster_unavailable"
    default_detail = "The cluster is unreachable right now."


def _rank_invalid(message: str) -> exceptions.ValidationError:
    """A 400 whose detail says what is wrong with `rank`, and names the field."""
    return exceptions.ValidationError({"non_field_errors": [message], "rank": [message]})


class WorkloadViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      mixins.DestroyModelMixin, TenantScopedViewSet[Workload]):
    """The caller's tenant's workloads (TenantScopedViewSet: another tenant's is a 404; stop
    and delete are for those who may change the workload, else 403)."""

    serializer_class = WorkloadSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = WorkloadFilterSet
    queryset = Workload.objects.with_relations()
    change_actions = frozenset({"destroy", "stop"})
    refusal = "You may not change this workload."
    request: TenantAPIRequest

    def _tenant(self) -> Tenant:
        """The tenant a launch goes to: the caller's current project's, never the body's."""
        identity, tenant = self.request.identity, self.request.tenant
        if identity.project is None or tenant is None:
            raise exceptions.PermissionDenied("Choose a project first.")
        if not Tenant.objects.permits(identity, Action.LAUNCH, tenant):
            raise exceptions.PermissionDenied("Your role in this project cannot launch workloads.")
        return tenant

    @extend_schema(request=LaunchSerializer,
                   responses={201: WorkloadSerializer, 200: WorkloadSerializer},
                   parameters=[OpenApiParameter(
                       "Idempotency-Key", str, OpenApiParameter.HEADER,
                       description="At most 128 characters. A retry with the same key and body "
                                   "answers 200 with the workload the first request made; the "
                                   "same key with another body is 422 "
                                   "`idempotency_key_reused`.")])
    def create(self, request: TenantAPIRequest) -> Response:
        tenant = self._tenant()
        serializer = LaunchSerializer(data=request.data, tenant=tenant,
                                      quota=Quota.objects.get(tenant=tenant),
                                      identity=request.identity)
        serializer.is_valid(raise_exception=True)
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and len(key) > 128:
            raise exceptions.ValidationError({"Idempotency-Key": ["At most 128 characters."]})
        try:
            workload, created = workload_launch(tenant=tenant, user=request.user,
                                                request=serializer.validated_data,
                                                idempotency_key=key,
                                                request_fingerprint=launch_fingerprint(
                                                    request.data))
        except AddressesExhausted as exc:
            raise NoAddressFree(str(exc)) from exc
        except AdmissionRefused as exc:  # its code: quota_exceeded, budget_exhausted …
            raise QuotaExceeded(str(exc), code=exc.code) from exc
        except IdempotencyKeyReused as exc:
            raise IdempotencyConflict(str(exc)) from exc
        return Response(WorkloadSerializer(workload).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=LaunchSerializer, responses=LaunchCheckSerializer)
    @action(detail=False, methods=["post"])
    def check(self, request: TenantAPIRequest) -> Response:
        """What this launch would be told before submitting it (the launch page's live check
        tells the same); nothing is launched. What the cluster could never run (a group its
        engine is missing for, a request no node could hold) is told as an error note, and so
        is an image its registry secret cannot pull (the registry is asked)."""
        tenant = self._tenant()
        quota = Quota.objects.get(tenant=tenant)
        serializer = LaunchSerializer(data=request.data, tenant=tenant, quota=quota,
                                      check_capacity=False, identity=request.identity)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        notes = launch_advice(launch_context(
            tenant=tenant, user=request.user, gpu_type=data["gpu_type"],
            template=data["template"], gpus_per_node=data["gpu_count"], nodes=data.get("nodes", 1),
            max_runtime_minutes=data.get("max_runtime_minutes") or None,
            reads=tenant_gpu_reads(tenant, quota)))
        notes += pull_advice(launch_pull_check(data, tenant))
        return Response(LaunchCheckSerializer(
            {"notes": [{"level": level, "message": message} for level, message in notes]}).data)

    @extend_schema(request=None, responses={202: WorkloadSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        workload = workload_stop(workload=self.get_object(), user=request.user)
        return Response(WorkloadSerializer(workload).data, status=status.HTTP_202_ACCEPTED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workload_delete(workload=self.get_object(), user=self.request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=WorkloadEventSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)  # every event, one list
    def events(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        workload = self.get_object()
        data = WorkloadEventSerializer(workload.events.all(), many=True).data
        if not self._may_see_secrets(workload):
            for event in data:
                event["message"] = redact(event["message"], (workload.access_token,))
        return Response(data)

    def _may_see_secrets(self, workload: Workload) -> bool:
        return workload_may_see_secrets(self.request.identity, workload)

    @extend_schema(request=None, responses={201: WorkloadTokenSerializer})
    @action(detail=True, methods=["post"], url_path="access-token")
    def access_token(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        """A bearer token for this workload's address, for scripts: send it as
        `Authorization: Bearer <token>`. It lives a minute (ask again); only those the
        project's rule lets open the workload get one."""
        workload = self.get_object()
        identity = request.identity
        try:
            issued = workload_token_issue(workload=workload, user=request.user,
                                          role=identity.role, is_admin=identity.is_admin)
        except AccessRefused as exc:
            raise exceptions.PermissionDenied(str(exc), code=AccessRefused.code) from exc
        seconds = max(0, int((issued.expires_at - timezone.now()).total_seconds()))
        return Response(WorkloadTokenSerializer({
            "token": issued.token, "token_type": "Bearer", "expires_at": issued.expires_at,
            "expires_in": seconds, "url": workload.url or workload.base_url}).data,
            status=status.HTTP_201_CREATED)

    @extend_schema(request=SSHCertificateRequestSerializer,
                   responses={201: SSHCertificateSerializer})
    @action(detail=True, methods=["post"], url_path="ssh-certificate")
    def ssh_certificate(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        """A short-lived OpenSSH user certificate for your public key, for this workload only
        (its principal: your Keystone user), with the Host block and known_hosts line that
        reach it through its login (`gpuctl ssh ID` does all of it). Only those the
        project's rule lets open the workload get one."""
        workload = self.get_object()
        serializer = SSHCertificateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        identity = request.identity
        try:
            issued = ssh_certificate_issue(
                workload=workload, user=request.user, role=identity.role,
                is_admin=identity.is_admin, public_key=serializer.validated_data["public_key"],
                from_address=request.META.get("REMOTE_ADDR", ""))
        except SSHRefused as exc:
            raise exceptions.PermissionDenied(str(exc), code=exc.code) from exc
        except KeyRefused as exc:
            raise exceptions.ValidationError({"public_key": [str(exc)]}) from exc
        return Response(SSHCertificateSerializer({
            "certificate": issued.certificate.text, "principal": issued.principal,
            "valid_until": issued.certificate.valid_before, "ssh_config": issued.ssh_config,
            "known_hosts": issued.known_hosts, "host_alias": issued.host_alias}).data,
            status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[
        OpenApiParameter("tail", int),
        OpenApiParameter("rank", str, description="a distributed workload's rank (0, 1, …) or "
                                                  "`launcher` (an MPI job's); default: rank 0")],
        responses={200: inline_serializer("WorkloadLogs", {
            "lines": serializers.ListField(child=serializers.CharField())})})
    @action(detail=True, methods=["get"])
    def logs(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        """The last `tail` lines of the workload's container (a distributed workload's: of
        its rank `rank`). Those who may not manage the workload (other members, readers) read
        them with its access token and every `…token=` value replaced by `[redacted]`."""
        workload = self.get_object()
        tail = query_number(request, "tail", low=1, high=10000, default=100)
        given = request.query_params.get("rank")
        rank: int | str | None = given if given == "launcher" else query_digits(request, "rank")
        if given is not None and rank is None:
            raise _rank_invalid("rank: a rank number (0, 1, …) or `launcher`.")
        try:
            lines = workload_logs(workload, tail=tail, rank=rank)
        except RankUnknown as exc:
            raise _rank_invalid(str(exc)) from exc
        except KubeError as exc:
            raise ClusterUnavailable() from exc
        if not self._may_see_secrets(workload):
            lines = workload_redact(workload, lines)  # readers see that it runs, not the way in
        return Response({"lines": lines})


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
        workload = request.auth  # WorkloadReportAuthentication's
        assert isinstance(workload, Workload)
        answer = ssh_session_report(workload=workload, event=data["event"], payload=data)
        return Response(answer)
