"""The catalogue's API: GET /api/v1/gpu-types/ (with the capacity view's live figures) and
GET /api/v1/templates/, for every signed-in caller."""

from __future__ import annotations

from rest_framework import mixins, viewsets
from rest_framework.response import Response

from cluster.capacity import gpu_capacity
from kube.client import KubeError

from ..models import GpuType, Template
from .serializers import GpuTypeSerializer, TemplateSerializer


class GpuTypeViewSet(viewsets.GenericViewSet):
    """The GPU type catalogue with live capacity and free GPUs per type."""

    serializer_class = GpuTypeSerializer
    pagination_class = None
    queryset = GpuType.objects.none()

    def list(self, request):
        types = list(GpuType.objects.filter(enabled=True))
        try:
            capacity = gpu_capacity()
        except KubeError:
            capacity = {}  # the catalogue still answers; live figures are null
        rows = []
        for gpu_type in types:
            cap = capacity.get(gpu_type.slug)
            rows.append({
                "slug": gpu_type.slug, "name": gpu_type.name,
                "resource_name": gpu_type.resource_name,
                "node_selector": gpu_type.node_selector, "memory_gb": gpu_type.memory_gb,
                "capacity": cap.capacity if cap else None,
                "allocatable": cap.allocatable if cap else None,
                "allocated": cap.allocated if cap else None,
                "free": cap.free if cap else None,
                "largest_node": cap.largest_node if cap else None,
                "largest_free_block": cap.largest_free_block if cap else None,
                "nodes": cap.nodes if cap else None,
            })
        return Response(GpuTypeSerializer(rows, many=True).data)


class TemplateViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The templates researchers launch from."""

    serializer_class = TemplateSerializer
    pagination_class = None
    queryset = Template.objects.filter(enabled=True)
