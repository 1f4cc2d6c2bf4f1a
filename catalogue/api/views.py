"""The catalogue's API: GET /api/v1/gpu-types/ (with the capacity view's live figures) and
GET /api/v1/templates/, for every signed-in caller."""

from __future__ import annotations

from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.capacity import gpu_capacity
from clusters.selectors import clusters_capacity_by_type
from core.registry import SharedReads
from kube.client import KubeError

from ..models import GpuType, Template
from ..selectors import capacity_outlook
from ..sharing import fraction_text
from .serializers import GpuTypeRow, GpuTypeSerializer, TemplateSerializer


class GpuTypeViewSet(viewsets.GenericViewSet[GpuType]):
    """The GPU type catalogue with live capacity and free GPUs per type."""

    # DRF's stubs tie a view's serializer to its queryset's model; this one shapes the rows
    # that list() builds (the queryset only names the model, for the schema)
    serializer_class = GpuTypeSerializer  # type: ignore[assignment]
    pagination_class = None
    queryset = GpuType.objects.none()

    def list(self, request: Request) -> Response:
        types = list(GpuType.objects.filter(enabled=True).select_related("physical"))
        try:
            capacity = gpu_capacity()
        except KubeError:
            capacity = {}  # the catalogue still answers; live figures are null
        by_cluster = clusters_capacity_by_type(capacity or None)
        rows: list[GpuTypeRow] = []
        tenant = getattr(request, "tenant", None)
        # every type's outlook starts from the free units read above, and the calendar's reads
        # are shared between them: a capacity read per type cost its catalogue, health and
        # admitted workloads' queries again, once per type
        reads = SharedReads()
        for gpu_type in types:
            cap = capacity.get(gpu_type.slug)
            rows.append({
                "slug": gpu_type.slug, "name": gpu_type.name,
                "resource_name": gpu_type.resource_name,
                "node_selector": gpu_type.node_selector, "memory_gb": gpu_type.memory_gb,
                "sharing": gpu_type.sharing, "gpu_fraction": float(gpu_type.gpu_fraction),
                "gpu_fraction_text": fraction_text(gpu_type.gpu_fraction),
                "physical": gpu_type.physical_slug,
                "device_class": gpu_type.claim_class or None,
                "mig_profile": gpu_type.dra_profile or None,
                "quota_resource": gpu_type.quota_resource,
                "capacity": cap.capacity if cap else None,
                "allocatable": cap.allocatable if cap else None,
                "allocated": cap.allocated if cap else None,
                "free": cap.free if cap else None,
                "largest_node": cap.largest_node if cap else None,
                "largest_free_block": cap.largest_free_block if cap else None,
                "nodes": cap.nodes if cap else None,
                "clusters": by_cluster.get(gpu_type.slug, {}),
                "upcoming": (capacity_outlook(gpu_type, tenant=tenant, free_now=cap.free,
                                              reads=reads) if cap else None),
            })
        # (DRF's stubs take one instance, also with many=True)
        return Response(GpuTypeSerializer(rows, many=True).data)  # type: ignore[arg-type]


class TemplateViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Template]):
    """The templates researchers launch from."""

    serializer_class = TemplateSerializer
    pagination_class = None
    queryset = Template.objects.filter(enabled=True)
