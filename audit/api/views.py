"""GET /api/v1/audit/: the audit trail, for admins, filtered as the admin page filters."""

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import mixins

from api.permissions import IsPortalAdmin
from api.viewsets import TenantScopedViewSet

from ..filtersets import AuditRecordFilterSet
from ..models import AuditRecord
from .serializers import AuditRecordSerializer


class AuditRecordViewSet(mixins.ListModelMixin, TenantScopedViewSet[AuditRecord]):
    """The audit trail (admins)."""

    serializer_class = AuditRecordSerializer
    permission_classes = [IsPortalAdmin]
    filter_backends = [DjangoFilterBackend]
    filterset_class = AuditRecordFilterSet
    queryset = AuditRecord.objects.select_related("tenant")
