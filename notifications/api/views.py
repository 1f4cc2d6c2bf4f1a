"""`/api/v1/notifications/`: the caller's own notifications, their preferences and webhooks.

A notification is addressed to one person: every lookup starts from the caller's own rows
(PersonalQuerySet.restrict), whatever the project and the role, admins included: another
user's notification or webhook is a 404. A project's webhooks are seen by its people (that one
exists) and managed (URL, delete, test, enable, confirm) by its managers and admins. A test is
queued for the webhook workers (202 with the delivery to poll: `GET …/deliveries/{id}/`, seen
by who manages its webhook), at most PORTAL_WEBHOOK_TEST_RATE per user."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import APIRequest
from api.throttling import PortalUserRateThrottle
from api.viewsets import ID_PATTERN, ViewMixin
from identity.scoping import Action
from tenants.models import Tenant

from ..filtersets import NotificationFilterSet
from ..models import Channel, Delivery, Kind, Notification, Webhook
from ..selectors import preferences_of, unread_count, webhook_manageable
from ..services import (
    PreferencesInvalid,
    WebhookLimitReached,
    WebhookStateRefused,
    notification_read,
    notifications_read_all,
    preferences_clean,
    preferences_set,
    webhook_confirm,
    webhook_create,
    webhook_delete,
    webhook_enable,
    webhook_test,
)
from ..throttling import WebhookTestThrottle
from ..webhook_urls import WebhookURLRefused
from .serializers import (
    DeliverySerializer,
    NotificationSerializer,
    ReadAllSerializer,
    UnreadCountSerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookSerializer,
)

_M = TypeVar("_M", bound=Model)


class OwnRows(ViewMixin[_M]):
    """get_queryset(): the model's rows restricted to the caller (`restrict(identity)`)."""

    request: APIRequest

    def get_queryset(self) -> QuerySet[_M]:
        queryset = super().get_queryset()
        if getattr(self, "swagger_fake_view", False):  # the schema generator: no request
            return queryset.none()
        return queryset.restrict(self.request.identity)  # type: ignore[attr-defined, no-any-return]


class NotificationViewSet(OwnRows[Notification], mixins.ListModelMixin,
                          viewsets.GenericViewSet[Notification]):
    """Your notifications, newest first (`?unread=true`, `?kind=`)."""

    queryset = Notification.objects.select_related("tenant")
    serializer_class = NotificationSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = NotificationFilterSet
    lookup_value_regex = ID_PATTERN

    @extend_schema(request=None, responses=NotificationSerializer)
    @action(detail=True, methods=["post"])
    def read(self, request: APIRequest, pk: str) -> Response:
        notification = self.get_object()
        notification_read(notification=notification)
        notification.refresh_from_db(fields=["read_at"])
        return Response(NotificationSerializer(notification).data)

    @extend_schema(request=None, responses=ReadAllSerializer)
    @action(detail=False, methods=["post"], url_path="read-all")
    def read_all(self, request: APIRequest) -> Response:
        return Response({"marked": notifications_read_all(user=request.user)})

    @extend_schema(responses=UnreadCountSerializer)
    @action(detail=False, methods=["get"], url_path="unread-count")
    def unread_count(self, request: APIRequest) -> Response:
        return Response({"unread": unread_count(request.user)})


def _preferences_body(user: Any) -> dict[str, dict[str, bool]]:
    chosen = preferences_of(user)
    return {kind: {channel: chosen[(kind, channel)] for channel in Channel.values}
            for kind in Kind.values}


PREFERENCES = inline_serializer("NotificationPreferences", fields={
    kind: inline_serializer(f"NotificationPreferences_{kind}", fields={
        channel: serializers.BooleanField() for channel in Channel.values})
    for kind in Kind.values})


class PreferencesView(APIView):
    """Which kinds reach you on which channel: {kind: {channel: bool}}, defaults filled in. A
    PUT may name some kinds and channels; an unknown one is a 400 and nothing is stored."""

    @extend_schema(responses=PREFERENCES)
    def get(self, request: APIRequest) -> Response:
        return Response(_preferences_body(request.user))

    @extend_schema(request=PREFERENCES, responses=PREFERENCES)
    def put(self, request: APIRequest) -> Response:
        try:
            choices = preferences_clean(request.data)
        except PreferencesInvalid as exc:
            raise exceptions.ValidationError(exc.errors) from exc
        preferences_set(user=request.user, choices=choices)
        return Response(_preferences_body(request.user))


MANAGERS_ONLY = "Only the project's managers and portal administrators manage its webhooks."


class WebhookStateConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "webhook_state"


class WebhookViewSet(OwnRows[Webhook], mixins.ListModelMixin, mixins.DestroyModelMixin,
                     viewsets.GenericViewSet[Webhook]):
    """Your webhooks and your current project's (whose URL only its managers see)."""

    queryset = Webhook.objects.select_related("user", "tenant", "created_by")
    serializer_class = WebhookSerializer
    lookup_value_regex = ID_PATTERN
    refusal = MANAGERS_ONLY

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["manageable"] = {hook.pk: webhook_manageable(self.request.identity, hook)
                                     for hook in self.get_queryset()}
        return context

    def get_object(self) -> Webhook:
        webhook = super().get_object()
        if not webhook_manageable(self.request.identity, webhook):
            raise exceptions.PermissionDenied(self.refusal)
        return webhook

    @extend_schema(request=WebhookCreateSerializer, responses={201: WebhookCreatedSerializer})
    def create(self, request: APIRequest) -> Response:
        body = WebhookCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = None
        if data.get("tenant") is not None:
            tenant = Tenant.objects.restrict(request.identity, Action.VIEW).filter(
                pk=data["tenant"]).first()
            if tenant is None:
                raise exceptions.ValidationError({"tenant": ["No such project."]})
            if not Tenant.objects.permits(request.identity, Action.CHANGE, tenant):
                raise exceptions.PermissionDenied(self.refusal)
        try:
            webhook = webhook_create(acting_user=request.user, url=data["url"],
                                     kinds=data["kinds"], tenant=tenant)
        except WebhookURLRefused as exc:
            raise exceptions.ValidationError({"url": [str(exc)]}) from exc
        except WebhookLimitReached as exc:
            raise exceptions.PermissionDenied(str(exc), code="webhook_limit") from exc
        shown = WebhookCreatedSerializer(webhook, context={"manageable": {webhook.pk: True}})
        return Response({**shown.data, "secret": webhook.secret}, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: Webhook) -> None:
        webhook_delete(acting_user=self.request.user, webhook=instance)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"],
            throttle_classes=[PortalUserRateThrottle, WebhookTestThrottle])
    def test(self, request: APIRequest, pk: str) -> Response:
        """Queue a signed test POST; 202 with the delivery, to poll at its `location` until
        `done` (the receiver's answer: `state`, `last_status`, `last_error`)."""
        delivery = webhook_test(acting_user=request.user, webhook=self.get_object())
        shown = DeliverySerializer(delivery).data
        return Response(shown, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": shown["location"]})

    def _changed(self, change: Any) -> Response:
        try:
            webhook = change(acting_user=self.request.user, webhook=self.get_object())
        except WebhookStateRefused as exc:
            raise WebhookStateConflict(str(exc)) from exc
        return Response(WebhookSerializer(webhook, context={"manageable": {webhook.pk: True}})
                        .data)

    @extend_schema(request=None, responses=WebhookSerializer)
    @action(detail=True, methods=["post"])
    def enable(self, request: APIRequest, pk: str) -> Response:
        """Deliveries go out again, the failures in a row from 0 (a disabled webhook); 409
        `webhook_state` for a project's webhook that waits for a confirmation."""
        return self._changed(webhook_enable)

    @extend_schema(request=None, responses=WebhookSerializer)
    @action(detail=True, methods=["post"])
    def confirm(self, request: APIRequest, pk: str) -> Response:
        """A project's webhook: you (a manager) take it on; it posts while you are a manager.
        409 `webhook_state` for a webhook of a user's own."""
        return self._changed(webhook_confirm)


class DeliveryViewSet(OwnRows[Delivery], mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet[Delivery]):
    """A webhook's delivery (a test's, a notification's): seen where its webhook is managed."""

    queryset = Delivery.objects.select_related("webhook__user", "webhook__tenant")
    serializer_class = DeliverySerializer
    lookup_value_regex = ID_PATTERN

    def get_object(self) -> Delivery:
        delivery = super().get_object()
        if delivery.webhook is None or not webhook_manageable(self.request.identity,
                                                              delivery.webhook):
            raise exceptions.PermissionDenied(MANAGERS_ONLY)
        return delivery
