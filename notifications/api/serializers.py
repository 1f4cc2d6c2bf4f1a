"""API shapes of notifications, preferences and webhooks."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from ..models import Delivery, Kind, Notification, Webhook


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    workload = serializers.IntegerField(source="workload_id", allow_null=True)
    project = serializers.SerializerMethodField(help_text="the project's name, if any")
    read = serializers.SerializerMethodField()

    class Meta:
        model = Notification
        fields = ["id", "kind", "title", "text", "workload", "project", "link", "created_at",
                  "read", "read_at"]
        read_only_fields = fields

    def get_project(self, obj: Notification) -> str | None:
        return obj.tenant.name if obj.tenant_id and obj.tenant else None

    def get_read(self, obj: Notification) -> bool:
        return obj.read_at is not None


class UnreadCountSerializer(serializers.Serializer[dict[str, int]]):
    unread = serializers.IntegerField()


class ReadAllSerializer(serializers.Serializer[dict[str, int]]):
    marked = serializers.IntegerField(help_text="how many were unread")


class PreferencesSerializer(serializers.Serializer[dict[str, Any]]):
    """{kind: {channel: bool}} for every kind and channel (the schema's shape; the view
    validates through services.preferences_clean)."""

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class WebhookSerializer(serializers.ModelSerializer[Webhook]):
    url = serializers.SerializerMethodField(
        help_text="only for who may manage the webhook (its owner; a project's managers)")
    project = serializers.SerializerMethodField()
    manageable = serializers.SerializerMethodField()
    active = serializers.BooleanField(read_only=True, help_text="deliveries go out (state active)")
    state = serializers.ChoiceField(
        choices=Webhook.State.choices, read_only=True,
        help_text="active; disabled (PORTAL_WEBHOOK_DISABLE_AFTER deliveries failed in a row: "
                  "POST …/enable/); needs_confirmation (a project's, whose creator is no longer "
                  "a manager: POST …/confirm/)")
    failures = serializers.IntegerField(read_only=True, help_text="deliveries failed in a row")

    class Meta:
        model = Webhook
        fields = ["id", "url", "project", "kinds", "active", "state", "failures", "manageable",
                  "created_at"]
        read_only_fields = fields

    def _manageable(self, obj: Webhook) -> bool:
        return bool(self.context.get("manageable", {}).get(obj.pk))

    def get_url(self, obj: Webhook) -> str | None:
        return obj.url if self._manageable(obj) else None

    def get_project(self, obj: Webhook) -> str | None:
        return obj.tenant.name if obj.tenant_id and obj.tenant else None

    def get_manageable(self, obj: Webhook) -> bool:
        return self._manageable(obj)


class WebhookCreateSerializer(serializers.Serializer[dict[str, Any]]):
    url = serializers.CharField(max_length=500)
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=Kind.choices),
                                  required=False, default=list,
                                  help_text="the kinds it gets; empty: every kind")
    tenant = serializers.IntegerField(required=False, allow_null=True,
                                      help_text="a project's id: the project's webhook "
                                                "(its managers and admins); none: your own")


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="the HMAC signing key: shown this once")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer[Delivery]):
    done = serializers.BooleanField(read_only=True,
                                    help_text="sent, failed or skipped: it will not change")
    location = serializers.SerializerMethodField(help_text="where to poll it (GET)")

    class Meta:
        model = Delivery
        fields = ["id", "webhook", "test", "state", "done", "attempts", "last_status",
                  "last_error", "created_at", "sent_at", "location"]
        read_only_fields = fields

    def get_location(self, obj: Delivery) -> str:
        return reverse("api:notification-delivery-detail", args=[obj.pk])
