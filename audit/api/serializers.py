from __future__ import annotations

from django.db.models import Model
from rest_framework import serializers

from ..models import AuditRecord


class AuditRecordSerializer(serializers.ModelSerializer[AuditRecord]):
    # null: a change of no one tenant's (a maintenance window, the catalogue)
    tenant: serializers.PrimaryKeyRelatedField[Model] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True)
    user = serializers.CharField(source="actor_name", help_text="the actor's name as shown "
                                 "when the record was written, or 'system'")
    user_id = serializers.CharField(source="actor_user_id", help_text="the actor's Keystone "
                                    "user id ('' for the portal itself)")

    class Meta:
        model = AuditRecord
        fields = ["id", "at", "user", "user_id", "tenant", "action", "target", "before", "after"]
        read_only_fields = fields
