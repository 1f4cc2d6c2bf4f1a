"""The volumes' API: GET|POST /api/v1/volumes/, GET|PATCH|DELETE /api/v1/volumes/{id}/,
GET /api/v1/storage-classes/ (the classes offered), and the datasets': GET|POST
/api/v1/datasets/, GET|PATCH|DELETE /api/v1/datasets/{id}/ (admins write)."""

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
from kube.client import KubeError
from tenants.authentication import TenantAPIRequest
from tenants.models import Tenant

from ..filtersets import VolumeFilterSet
from ..models import Dataset, StorageClass, Volume
from ..services import (
    DatasetInUse,
    StorageQuotaExceeded,
    VolumeInUse,
    VolumeInvalid,
    dataset_create,
    dataset_delete,
    dataset_update,
    volume_create,
    volume_delete,
    volume_grow,
)
from ..validation import DatasetInvalid
from .serializers import (
    DatasetAdminSerializer,
    DatasetCreateSerializer,
    DatasetSerializer,
    DatasetUpdateSerializer,
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


class DatasetBusy(exceptions.APIException):
    """409 dataset_in_use: live workloads mount it (where it would be closed)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = DatasetInUse.code
    category = Category.CONFLICT


class DatasetClusterUnavailable(exceptions.APIException):
    """503: the named PersistentVolume could not be looked up; nothing was recorded."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "cluster_unavailable"
    default_detail = ("The cluster did not answer, so the PersistentVolume could not be "
                      "checked; nothing was recorded. Try again later.")


def _projects(ids: list[int] | None) -> list[Tenant]:
    if not ids:
        return []
    tenants = list(Tenant.objects.filter(pk__in=ids))
    missing = sorted(set(ids) - {tenant.pk for tenant in tenants})
    if missing:
        raise exceptions.ValidationError({"projects": [
            f"No project {', '.join(map(str, missing[:5]))}."]})
    return tenants


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     TenantScopedViewSet[Dataset]):
    """Read-only datasets: those open to the caller's project (admins: every one); one not
    open to it is a 404. Admins publish, change and withdraw them."""

    queryset = Dataset.objects.prefetch_related("tenants")
    change_actions = frozenset({"partial_update", "destroy"})
    refusal = "Only admins change datasets."
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    request: TenantAPIRequest

    def get_serializer_class(self) -> type[DatasetSerializer]:
        identity = getattr(self.request, "identity", None)
        return DatasetAdminSerializer if identity is not None and identity.is_admin \
            else DatasetSerializer

    @extend_schema(request=DatasetCreateSerializer, responses={201: DatasetAdminSerializer})
    def create(self, request: TenantAPIRequest) -> Response:
        if not request.identity.is_admin:
            raise exceptions.PermissionDenied("Only admins publish datasets.")
        body = DatasetCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        tenants = _projects(data.pop("projects", None))
        try:
            dataset = dataset_create(
                user=request.user, name=data.pop("name"), description=data.pop(
                    "description", ""), size_gib=data.pop("size_gib"), kind=data.pop("kind"),
                open_to_all=data.pop("open_to_all"), tenants=tenants, source=data)
        except DatasetInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        except KubeError as exc:
            raise DatasetClusterUnavailable() from exc
        return Response(DatasetAdminSerializer(dataset).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=DatasetUpdateSerializer, responses=DatasetAdminSerializer)
    def partial_update(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        dataset = self.get_object()
        body = DatasetUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        if "projects" in changes:
            changes["tenants"] = _projects(changes.pop("projects"))
        try:
            dataset = dataset_update(dataset=dataset, user=request.user, changes=changes)
        except DatasetInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        except DatasetInUse as exc:
            raise DatasetBusy(str(exc)) from exc
        return Response(DatasetAdminSerializer(dataset).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: TenantAPIRequest, pk: str | None = None) -> Response:
        try:
            dataset_delete(dataset=self.get_object(), user=request.user)
        except DatasetInUse as exc:
            raise DatasetBusy(str(exc)) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)
