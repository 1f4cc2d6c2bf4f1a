from __future__ import annotations

from django.db.models import Model
from rest_framework import serializers

from ..models import AuditRecord


class AuditRecordSerializer(serializers.ModelSerializer[AuditRecord]):
    tenant: serializers.PrimaryKeyRelatedField[Model] = serializers.PrimaryKeyRelatedField(read_only=True)
    user = serializers.CharField(source="actor_name")

    class Meta:
        model = AuditRecord
        fields = ["id", "at", "user", "tenant", "action", "target", "before", "after"]
        read_only_fields = fields
