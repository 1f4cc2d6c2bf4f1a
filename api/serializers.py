from rest_framework import serializers


class ProjectSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    domain_id = serializers.CharField()


class MeSerializer(serializers.Serializer):
    """Who the caller is in the portal: their Keystone user, current project and role."""

    user_id = serializers.CharField()
    user_name = serializers.CharField()
    domain = serializers.CharField()
    project = ProjectSerializer(allow_null=True)
    role = serializers.CharField(allow_null=True)
    is_admin = serializers.BooleanField()
    namespace = serializers.CharField(allow_null=True)
    token_expires_at = serializers.DateTimeField()
