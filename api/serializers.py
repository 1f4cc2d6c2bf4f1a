from __future__ import annotations

from rest_framework import serializers

from identity.client import Project


class ProjectSerializer(serializers.Serializer[Project]):
    id = serializers.CharField()
    name = serializers.CharField()
    domain_id = serializers.CharField()


class MeSerializer(serializers.Serializer[dict[str, object]]):
    """Who the caller is in the portal: their Keystone user, current project and role."""

    user_id = serializers.CharField()
    user_name = serializers.CharField()
    domain = serializers.CharField()
    project = ProjectSerializer(allow_null=True)
    role = serializers.CharField(allow_null=True)
    is_admin = serializers.BooleanField()
    namespace = serializers.CharField(allow_null=True)
    token_expires_at = serializers.DateTimeField()
