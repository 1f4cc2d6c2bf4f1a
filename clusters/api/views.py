"""GET /api/v1/clusters/ (every signed-in caller: names, states, GPU types), GET
/api/v1/clusters/{name}/; admins: POST, PATCH /api/v1/clusters/{name}/, DELETE."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.authentication import APIRequest
from api.errors import Category
from identity.identity import Identity

from ..models import Cluster
from ..selectors import cluster_capacity, clusters_visible, gpu_types_offered
from ..services import (
    ClusterInUse,
    ClusterInvalid,
    cluster_delete,
    cluster_register,
    cluster_update,
)
from .serializers import (
    ClusterAdminSerializer,
    ClusterChangeSerializer,
    ClusterRow,
    ClusterSerializer,
    ClusterWriteSerializer,
)

NAME_PATTERN = "[a-z0-9][-a-z0-9]{0,39}"


class ClusterBusy(exceptions.APIException):
    """409 cluster_in_use: the home cluster cannot be disabled or removed."""

    status_code = status.HTTP_409_CONFLICT
    default_code = ClusterInUse.code
    category = Category.CONFLICT


def cluster_row(cluster: Cluster, *, admin: bool) -> ClusterRow:
    offered = gpu_types_offered(cluster, cluster_capacity(cluster))
    row: ClusterRow = {"name": cluster.name, "display_name": cluster.label,
                       "state": cluster.state, "gpu_types": offered}
    if admin:
        row.update(home=cluster.home, enabled=cluster.enabled, api_server=cluster.api_server,
                   credentials=cluster.credentials, kubeconfig_path=cluster.kubeconfig_path,
                   kubeconfig_secret=cluster.kubeconfig_secret, reason=cluster.reason,
                   state_since=cluster.state_since, last_seen=cluster.last_seen,
                   gpu_types_declared=cluster.gpu_types)
    return row


class ClusterViewSet(viewsets.GenericViewSet[Cluster]):
    """The clusters behind the portal: the home one first."""

    serializer_class = ClusterSerializer  # type: ignore[assignment]  # rows, not models
    pagination_class = None
    queryset = Cluster.objects.none()
    lookup_field = "name"
    lookup_value_regex = NAME_PATTERN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    request: APIRequest

    def _identity(self) -> Identity:
        return self.request.identity

    def _admin(self) -> None:
        if not self._identity().is_admin:
            raise exceptions.PermissionDenied("Only portal administrators change clusters.")

    def _one(self, name: str) -> Cluster:
        cluster = clusters_visible(self._identity()).filter(name=name).first()
        if cluster is None:
            raise exceptions.NotFound(f"No cluster named {name}.")
        return cluster

    def _shown(self, cluster: Cluster) -> dict[str, Any]:
        admin = self._identity().is_admin
        serializer = ClusterAdminSerializer if admin else ClusterSerializer
        return dict(serializer(cluster_row(cluster, admin=admin)).data)

    @extend_schema(responses=ClusterAdminSerializer(many=True))
    def list(self, request: Request) -> Response:
        return Response([self._shown(cluster)
                         for cluster in clusters_visible(self._identity())])

    @extend_schema(responses=ClusterAdminSerializer)
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(self._shown(self._one(name)))

    @extend_schema(request=ClusterWriteSerializer, responses={201: ClusterAdminSerializer})
    def create(self, request: Request) -> Response:
        self._admin()
        body = ClusterWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            cluster = cluster_register(user=request.user, fields=body.validated_data)
        except ClusterInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        return Response(self._shown(cluster), status=status.HTTP_201_CREATED)

    @extend_schema(request=ClusterChangeSerializer, responses=ClusterAdminSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        self._admin()
        cluster = self._one(name)
        body = ClusterChangeSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            cluster = cluster_update(user=request.user, cluster=cluster,
                                     changes=body.validated_data)
        except ClusterInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        return Response(self._shown(cluster))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        self._admin()
        try:
            cluster_delete(user=request.user, cluster=self._one(name))
        except ClusterInUse as exc:
            raise ClusterBusy(str(exc)) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)
