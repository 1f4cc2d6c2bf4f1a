"""The volumes' API: GET|POST /api/v1/volumes/, GET|PATCH|DELETE /api/v1/volumes/{id}/, and
GET /api/v1/storage-classes/ (the classes offered)."""

from __future__ import annotations

from typing import Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.errors import Category
from api.viewsets import TenantScopedViewSet
from identity.scoping import Action
from tenants.authentication import TenantAPIRequest
from tenants.models import Tenant

from ..filtersets import VolumeFilterSet
from ..models import StorageClass, Volume
from ..services import (
    StorageQuotaExceeded,
    VolumeInUse,
    VolumeInvalid,
    volume_create,
    volume_delete,
    volume_grow,
)
from .serializers import (
    StorageClassSerializer,
    VolumeCreateSerializer,
    VolumeGrowSerializer,
    VolumeSerializer,
)


class StorageQuotaRefused(exceptions.PermissionDenied):
    """403 quota_exceeded: the project's storage quota has no room (category admission)."""

    default_code = StorageQuotaExceeded.code
    category = Category.ADMISSION


class VolumeBusy(exceptions.APIException):
    """409 volume_in_use: live workloads mount it."""

    status_code = status.HTTP_409_CONFLICT
    default_code = VolumeInUse.code
    category = Category.CONFLICT


class VolumeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.DestroyModelMixin, TenantScopedViewSet[Volume]):
    """The caller's project's volumes: a member's own and the project's (managers: every
    one); another project's is a 404. Members make their own, managers the project's; a
    reader sees them and makes none."""

    serializer_class = VolumeSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = VolumeFilterSet
    queryset = Volume.objects.select_related("tenant", "owner")
    change_actions = frozenset({"partial_update", "destroy"})
    refusal = "You may not change this volume."
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    request: TenantAPIRequest

    def _tenant(self, scope: str) -> Tenant:
        identity, tenant = self.request.identity, self.request.tenant
        if identity.project is None or tenant is None:
            raise exceptions.PermissionDenied("Choose a project first.")
        if not Tenant.objects.permits(identity, Action.LAUNCH, tenant):
            raise exceptions.PermissionDenied("Your role in this project cannot make volumes.")
        if scope == Volume.Scope.PROJECT and not Tenant.objects.permits(
                identity, Action.CHANGE, tenant):
            raise exceptions.PermissionDenied("Only the project's managers make project "
                                              "volumes.")
        return tenant

    @extend_schema(request=VolumeCreateSerializer, responses={201: VolumeSerializer})
    def create(self, request: TenantAPIRequest) -> Response:
        serializer = VolumeCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        tenant = self._tenant(data["scope"])
        try:
            volume = volume_create(tenant=tenant, user=request.user, name=data["name"],
                                   size_gib=data["size_gib"], scope=data["scope"],
                                   storage_class=data.get("storage_class") or None)
        except VolumeInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        except StorageQuotaExceeded as exc:
            raise StorageQuotaRefused(str(exc)) from exc
        return Response(VolumeSerializer(volume).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=VolumeGrowSerializer, responses=VolumeSerializer)
    def partial_update(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        volume = self.get_object()
        serializer = VolumeGrowSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            volume = volume_grow(volume=volume, user=request.user,
                                 size_gib=serializer.validated_data["size_gib"])
        except VolumeInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        except StorageQuotaExceeded as exc:
            raise StorageQuotaRefused(str(exc)) from exc
        return Response(VolumeSerializer(volume).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            volume_delete(volume=self.get_object(), user=request.user)
        except VolumeInUse as exc:
            raise VolumeBusy(str(exc)) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class StorageClassViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[StorageClass]):
    """The storage classes offered for volumes, with what their admin says of them."""

    serializer_class = StorageClassSerializer
    pagination_class = None
    queryset = StorageClass.objects.offered()
