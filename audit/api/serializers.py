from rest_framework import serializers

from ..models import AuditRecord


class AuditRecordSerializer(serializers.ModelSerializer):
    tenant: serializers.PrimaryKeyRelatedField = serializers.PrimaryKeyRelatedField(read_only=True)
    user = serializers.CharField(source="actor_name")

    class Meta:
        model = AuditRecord
        fields = ["id", "at", "user", "tenant", "action", "target", "before", "after"]
        read_only_fields = fields
