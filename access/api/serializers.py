"""API shapes of workload access (each serializes a plain dict)."""

from rest_framework import serializers

from ..models import ServiceAccess


class WorkloadAccessSerializer(serializers.Serializer[dict[str, object]]):
    protected = serializers.BooleanField(help_text="the portal's login is in front of it")
    public = serializers.BooleanField(help_text="open to anyone (an admin allowed it)")
    who = serializers.ChoiceField(choices=ServiceAccess.choices,
                                  help_text="who of the project gets through")
    who_label = serializers.CharField()


class WorkloadTokenSerializer(serializers.Serializer[dict[str, object]]):
    token = serializers.CharField(help_text="send as `Authorization: Bearer <token>` to the "
                                            "workload's address")
    token_type = serializers.CharField()
    expires_at = serializers.DateTimeField()
    expires_in = serializers.IntegerField(help_text="seconds")
    url = serializers.CharField(help_text="the workload's address")


class ServiceAccessSerializer(serializers.Serializer[dict[str, object]]):
    who = serializers.ChoiceField(choices=ServiceAccess.choices, required=False)
    allow_public = serializers.BooleanField(required=False,
                                            help_text="admins only: the project may open "
                                                      "workloads to everyone")
