"""Reads of notifications: which channels a user wants for a kind, the unread count, who
manages a webhook and whether a project's webhook still has a manager behind it."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import OuterRef, Subquery

from identity.assignments import SYSTEM_TOKEN, project_role_now
from identity.client import KeystoneClient, KeystoneError
from identity.roles import PortalRole, project_role
from identity.scoping import Action
from tenants.models import Tenant

from .models import DEFAULTS, Channel, Delivery, Kind, Notification, NotificationPreference, Webhook

log = logging.getLogger(__name__)


def channels_for(user: Any, kind: str) -> set[str]:
    """The channels `user` wants `kind` on: their stored choices over DEFAULTS."""
    channels = set(DEFAULTS.get(kind, frozenset()))
    for channel, enabled in NotificationPreference.objects.filter(
            user=user, kind=kind).values_list("channel", "enabled"):
        (channels.add if enabled else channels.discard)(channel)
    return channels


def preferences_of(user: Any) -> dict[tuple[str, str], bool]:
    """(kind, channel) → on/off for every kind and channel, defaults filled in."""
    chosen = dict(((kind, channel), enabled) for kind, channel, enabled in
                  NotificationPreference.objects.filter(user=user)
                  .values_list("kind", "channel", "enabled"))
    return {(kind, channel): chosen.get((kind, channel), channel in DEFAULTS[kind])
            for kind in Kind.values for channel in Channel.values}


def unread_count(user: Any) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def webhook_manageable(identity: Any, webhook: Webhook) -> bool:
    """May `identity` see the URL of, delete and test `webhook`: their own, or their project's
    as its manager or an admin (a member only learns that the project has one)."""
    if webhook.tenant is None:
        return bool(webhook.user and webhook.user.keystone_user_id
                    and webhook.user.keystone_user_id == identity.unscoped.user_id)
    return Tenant.objects.permits(identity, Action.CHANGE, webhook.tenant)


def project_webhooks_manageable(identity: Any, tenant: Any) -> bool:
    """May `identity` add webhooks to `tenant` (its managers, admins)."""
    return tenant is not None and Tenant.objects.permits(identity, Action.CHANGE, tenant)


def last_deliveries(webhook_ids: list[int]) -> dict[int, Delivery]:
    """Each webhook's newest delivery (a test's or a notification's), by webhook id: two
    queries whatever the number of webhooks."""
    newest = Webhook.objects.filter(pk__in=webhook_ids).annotate(last=Subquery(
        Delivery.objects.filter(webhook=OuterRef("pk")).order_by("-id").values("id")[:1]))
    ids = [row for row in newest.values_list("last", flat=True) if row is not None]
    return {delivery.webhook_id: delivery for delivery in Delivery.objects.filter(pk__in=ids)
            if delivery.webhook_id is not None}


def webhook_creator_manages(webhook: Webhook) -> bool:
    """Is the user who made (or last confirmed) a project's webhook one of its managers now?
    Asked of Keystone (identity/assignments.py, cached a few seconds), at each delivery: a
    manager who lost the role no longer has the project's news sent where she chose. Raises
    KeystoneError when Keystone cannot say."""
    creator = webhook.created_by
    if webhook.tenant is None:
        return True
    if creator is None or not creator.keystone_user_id:
        return False
    role = project_role_now(creator.keystone_user_id, webhook.tenant.keystone_project_id)
    return role is not None and role >= PortalRole.MANAGER


def project_managers(tenant: Any) -> list[Any]:
    """The project's managers who use the portal: whom Keystone names its managers now (one
    question: the project's role assignments), as portal users. [] when Keystone cannot be
    asked (logged)."""
    client = KeystoneClient()
    try:
        members = client.project_members(SYSTEM_TOKEN.id(client), tenant.keystone_project_id)
    except KeystoneError as exc:
        log.warning("the managers of %s cannot be asked of Keystone: %s", tenant.name, exc)
        return []
    roles: dict[str, list[str]] = {}
    for member in members:
        roles.setdefault(member["user_id"], []).append(member["role"])
    managers = [user_id for user_id, names in roles.items()
                if (project_role(names) or 0) >= PortalRole.MANAGER]
    return list(get_user_model().objects.filter(keystone_user_id__in=managers).order_by("pk"))
