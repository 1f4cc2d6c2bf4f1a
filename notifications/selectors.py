"""Reads of notifications: which channels a user wants for a kind, the unread count."""

from __future__ import annotations

from typing import Any

from identity.scoping import Action
from tenants.models import Tenant

from .models import DEFAULTS, Notification, NotificationPreference, Webhook


def channels_for(user: Any, kind: str) -> set[str]:
    """The channels `user` wants `kind` on: their stored choices over DEFAULTS."""
    channels = set(DEFAULTS.get(kind, frozenset()))
    for channel, enabled in NotificationPreference.objects.filter(
            user=user, kind=kind).values_list("channel", "enabled"):
        (channels.add if enabled else channels.discard)(channel)
    return channels


def preferences_of(user: Any) -> dict[tuple[str, str], bool]:
    """(kind, channel) → on/off for every kind and channel, defaults filled in."""
    from .models import Channel, Kind

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
