"""Telling people: `notify`, the one sender every kind goes through.

A notification is written in the caller's transaction (it is part of the event: a state change
that rolls back tells nobody), at most once per user and event key. The outside channels (e-mail,
webhooks) are handed to a Celery task after the commit: a mail server or a webhook receiver that
is slow or down never holds up the caller (a launch, the tracker's cycle).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.tasks import send_on_commit

from .models import Channel, Notification, NotificationPreference

log = logging.getLogger(__name__)


def notify(*, kind: str, users: Iterable[Any], tenant: Any | None, title: str, text: str,
           key: str, workload_id: int | None = None, link: str = "") -> int:
    """One notification of `kind` to each of `users` about the event `key` (e.g.
    "started:42:3"); users already told of that event are skipped. Returns how many were new.
    The outside channels go out after the commit (notifications.tasks)."""
    recipients = {user.pk: user for user in users if user is not None}
    if not recipients:
        return 0
    with transaction.atomic():
        told = set(Notification.objects.filter(key=key, user_id__in=recipients)
                   .values_list("user_id", flat=True))
        new = [pk for pk in recipients if pk not in told]
        if not new:
            return 0
        # who turned the portal channel off for this kind: their row is kept (the event's
        # record, the outside channels' source) but arrives read, so the bell stays quiet
        quiet = set(NotificationPreference.objects.filter(
            user_id__in=new, kind=kind, channel=Channel.PORTAL, enabled=False)
            .values_list("user_id", flat=True))
        now = timezone.now()
        fresh = [Notification(user_id=pk, tenant=tenant, kind=kind, title=title[:255],
                              text=text, key=key[:200], workload_id=workload_id,
                              link=link[:500], read_at=now if pk in quiet else None)
                 for pk in new]
        # two senders of one event at once: the unique (user, key) keeps one row; the
        # dispatch task's claim (dispatched_at) hands each row out once
        Notification.objects.bulk_create(fresh, ignore_conflicts=True)
        from .tasks import notifications_dispatch_task

        send_on_commit(notifications_dispatch_task, key)
    return len(fresh)


def notification_read(*, notification: Notification, at: dt.datetime | None = None) -> bool:
    """Mark one notification read; False when it already was."""
    return bool(Notification.objects.filter(pk=notification.pk, read_at__isnull=True)
                .update(read_at=at or timezone.now()))


def notifications_read_all(*, user: Any, at: dt.datetime | None = None) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).update(
        read_at=at or timezone.now())


def preferences_set(*, user: Any, choices: dict[tuple[str, str], bool]) -> None:
    """Store the user's choice per (kind, channel)."""
    with transaction.atomic():
        for (kind, channel), enabled in choices.items():
            NotificationPreference.objects.update_or_create(
                user=user, kind=kind, channel=channel, defaults={"enabled": enabled})
