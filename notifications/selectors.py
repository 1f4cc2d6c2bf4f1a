"""Reads of notifications: which channels a user wants for a kind, the unread count."""

from __future__ import annotations

from typing import Any

from .models import DEFAULTS, Notification, NotificationPreference


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
