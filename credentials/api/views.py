"""`/api/v1/secrets/`: the caller's own secrets and their project's, by name.

Every method starts from `Secret.objects.restrict` (querysets.py): another project's secret, or
another user's own, is a 404. A reader sees the project's secrets' names and keys; a member
makes secrets of their own and uses the project's; a manager writes the project's. `data` is
taken by POST and PUT and given back by nothing. The value is written to the cluster within the
request (services.py): a cluster that does not take it is 503, and nothing is recorded."""

from __future__ import annotations

from typing import Any

from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.response import Response

from api.viewsets import TenantScopedViewSet
from kube.client import KubeError
from tenants.authentication import TenantAPIRequest
from tenants.models import Tenant

from ..models import Secret
from ..selectors import secret_may_change, secret_may_create
from ..services import (
    RegistryLoginRefused,
    SecretNameTaken,
    secret_create,
    secret_delete,
    secret_replace,
)
from .serializers import SecretCreateSerializer, SecretReplaceSerializer, SecretSerializer


class SecretClusterUnavailable(exceptions.APIException):
    """503: the cluster did not take (or drop) the value; nothing was recorded."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "cluster_unavailable"
    default_detail = ("The cluster did not answer, so the secret was not saved; nothing was "
                      "recorded. Try again later.")


class RegistryLoginFailed(exceptions.APIException):
    """400: the registry refused a registry secret's user and password; nothing recorded."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = RegistryLoginRefused.code


class SecretNameConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "secret_name_taken"


class SecretViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    TenantScopedViewSet[Secret]):
    """Secrets: yours and your current project's (names, kinds, keys; never a value)."""

    queryset = Secret.objects.select_related("tenant", "owner")
    serializer_class = SecretSerializer
    change_actions = frozenset({"update", "destroy"})
    refusal = "Only a project secret's managers, or a user secret's owner, may change it."
    request: TenantAPIRequest

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            identity = self.request.identity
            context["may_change"] = {secret.pk: secret_may_change(identity, secret)
                                     for secret in self.get_queryset()}
        return context

    def _shown(self, secret: Secret, code: int = status.HTTP_200_OK) -> Response:
        may = {secret.pk: secret_may_change(self.request.identity, secret)}
        return Response(SecretSerializer(secret, context={"may_change": may}).data, status=code)

    def _tenant(self, scope: str) -> Tenant:
        identity, tenant = self.request.identity, self.request.tenant
        if identity.project is None or tenant is None:
            raise exceptions.PermissionDenied("Choose a project first.")
        if not secret_may_create(identity, tenant, scope):
            raise exceptions.PermissionDenied(
                "Only the project's managers make project secrets." if scope == "project"
                else "Your role in this project cannot make secrets.")
        return tenant

    @extend_schema(request=SecretCreateSerializer, responses={201: SecretSerializer})
    @sensitive_variables()
    def create(self, request: TenantAPIRequest) -> Response:
        body = SecretCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data
        tenant = self._tenant(fields["scope"])
        try:
            secret = secret_create(tenant=tenant, acting_user=request.user, name=fields["name"],
                                   kind=fields["kind"], scope=fields["scope"],
                                   data=fields["data"])
        except SecretNameTaken as exc:
            raise SecretNameConflict(exc.errors["name"][0]) from exc
        except RegistryLoginRefused as exc:
            raise RegistryLoginFailed(exc.errors["data"][0]) from exc
        except KubeError as exc:
            raise SecretClusterUnavailable() from exc
        return self._shown(secret, status.HTTP_201_CREATED)

    @extend_schema(request=SecretReplaceSerializer, responses=SecretSerializer)
    @sensitive_variables()
    def update(self, request: TenantAPIRequest, pk: str) -> Response:
        """Replace the secret's data whole (write-only: the answer shows its keys)."""
        secret = self.get_object()
        body = SecretReplaceSerializer(data=request.data, context={"kind": secret.kind})
        body.is_valid(raise_exception=True)
        try:
            secret = secret_replace(secret=secret, acting_user=request.user,
                                    data=body.validated_data["data"])
        except RegistryLoginRefused as exc:
            raise RegistryLoginFailed(exc.errors["data"][0]) from exc
        except KubeError as exc:
            raise SecretClusterUnavailable() from exc
        return self._shown(secret)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: TenantAPIRequest, pk: str) -> Response:
        secret = self.get_object()
        try:
            secret_delete(secret=secret, acting_user=request.user)
        except KubeError as exc:
            raise SecretClusterUnavailable(
                "The cluster did not answer, so the secret was not deleted.") from exc
        return Response(status=status.HTTP_204_NO_CONTENT)
