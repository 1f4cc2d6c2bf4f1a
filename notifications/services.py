"""Telling people: `notify`, the one sender every kind goes through.

A notification is written in the caller's transaction (it is part of the event: a state change
that rolls back tells nobody), at most once per user and event key. The outside channels (e-mail,
webhooks) are handed to a Celery task after the commit: a mail server or a webhook receiver that
is slow or down never holds up the caller (a launch, the tracker's cycle).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from audit.services import audit_record
from core.tasks import send_on_commit
from core.validation import FieldsInvalid

from .models import Channel, Kind, Notification, NotificationPreference, Webhook
from .webhook_urls import url_host, webhook_target
from .webhooks import PostResult, webhook_post, webhook_test_payload

log = logging.getLogger(__name__)


_STATES_SQL = """
SELECT u.id, u.email,
  EXISTS (SELECT 1 FROM {notification} n WHERE n.user_id = u.id AND n.key = %s),
  EXISTS (SELECT 1 FROM {preference} p WHERE p.user_id = u.id AND p.kind = %s
          AND p.channel = %s AND NOT p.enabled),
  EXISTS (SELECT 1 FROM {webhook} w WHERE w.active AND (w.user_id = u.id OR w.tenant_id = %s))
FROM {user} u WHERE u.id IN ({ids})
"""


def _recipient_states(ids: list[int], *, kind: str, key: str, tenant_id: int | None
                      ) -> list[tuple[int, str, bool, bool, bool]]:
    """(user id, e-mail, told of `key` already, portal channel off for `kind`, has a webhook
    of their own or of the project) per recipient, in one statement. Written as SQL (valid on
    PostgreSQL and SQLite): the ORM's compilation of this query cost more than running it, on
    the path every finishing workload takes."""
    sql = _STATES_SQL.format(
        notification=Notification._meta.db_table, preference=NotificationPreference._meta.db_table,
        webhook=Webhook._meta.db_table, user=get_user_model()._meta.db_table,
        ids=", ".join(["%s"] * len(ids)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, kind, Channel.PORTAL, tenant_id, *ids])
        return [(pk, email, bool(told), bool(quiet), bool(hooked))
                for pk, email, told, quiet, hooked in cursor.fetchall()]


def notify(*, kind: str, users: Iterable[Any], tenant: Any | None, title: str, text: str,
           key: str, workload_id: int | None = None, link: str = "") -> int:
    """One notification of `kind` to each of `users` about the event `key` (e.g.
    "started:42:3"); users already told of that event are skipped. Returns how many were new.
    The outside channels go out after the commit (notifications.tasks), for the recipients
    that have one (an e-mail address where e-mail is configured, a webhook of their own or of
    the project); the others' rows are written handed out already, so that nothing waits on
    the broker or the beat's sweep for them.

    Two statements, no savepoint: one query (who was told already, who turned the portal
    channel off, who has an outside channel), one INSERT (the tracker tells every finishing
    workload through here: bench/notifications_bench.py)."""
    recipients = {user.pk: user for user in users if user is not None}
    if not recipients:
        return 0
    key = key[:200]  # as stored: the dispatch task looks the event up by it
    states = _recipient_states(list(recipients), kind=kind, key=key,
                               tenant_id=tenant.pk if tenant is not None else None)
    mail = bool(settings.EMAIL_HOST)
    now = timezone.now()
    fresh = [Notification(user_id=pk, tenant=tenant, kind=kind, title=title[:255], text=text,
                          key=key, workload_id=workload_id, link=link[:500],
                          read_at=now if quiet else None,
                          dispatched_at=None if hooked or (mail and email) else now)
             for pk, email, told, quiet, hooked in states if not told]
    if not fresh:
        return 0
    # two senders of one event at once: the unique (user, key) keeps one row; the dispatch
    # task's claim (dispatched_at) hands each row out once
    Notification.objects.bulk_create(fresh, ignore_conflicts=True)
    if any(row.dispatched_at is None for row in fresh):
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


class PreferencesInvalid(FieldsInvalid):
    """Unknown kinds or channels in a preferences change: `errors` names each (nothing stored)."""


def preferences_clean(raw: Any) -> dict[tuple[str, str], bool]:
    """{kind: {channel: bool}} → {(kind, channel): bool}; PreferencesInvalid names what is
    unknown or not a boolean (the API's 400 and the page's form both go through it)."""
    if not isinstance(raw, dict):
        raise PreferencesInvalid({"non_field_errors": [
            "Expected an object {kind: {channel: true|false}}."]})
    errors: dict[str, list[str]] = {}
    choices: dict[tuple[str, str], bool] = {}
    for kind, channels in raw.items():
        if kind not in Kind.values:
            errors[str(kind)] = [f"Unknown kind; the kinds are {', '.join(Kind.values)}."]
            continue
        if not isinstance(channels, dict):
            errors[kind] = ["Expected an object {channel: true|false}."]
            continue
        for channel, enabled in channels.items():
            if channel not in Channel.values:
                errors[f"{kind}.{channel}"] = [
                    f"Unknown channel; the channels are {', '.join(Channel.values)}."]
            elif not isinstance(enabled, bool):
                errors[f"{kind}.{channel}"] = ["Expected true or false."]
            else:
                choices[(kind, channel)] = enabled
    if errors:
        raise PreferencesInvalid(errors)
    return choices


def _webhook_audit(webhook: Webhook) -> dict[str, Any]:
    """What the audit trail keeps of a webhook: never its URL's path or its secret."""
    return {"host": url_host(webhook.url), "kinds": list(webhook.kinds),
            "owner": webhook.user.label if webhook.user else None,
            "project": webhook.tenant.name if webhook.tenant else None}


def webhook_create(*, acting_user: Any, url: str, kinds: Iterable[str] = (),
                   tenant: Any | None = None) -> Webhook:
    """A webhook of `acting_user`'s own, or of `tenant` (the caller checked that they may manage
    the project's). The URL is checked against SSRF here (WebhookURLRefused) and again at each
    POST. The secret is the caller's to see once, from the returned row."""
    kinds = sorted(set(kinds))
    unknown = [kind for kind in kinds if kind not in Kind.values]
    if unknown:
        raise ValueError(f"Unknown kinds: {', '.join(unknown)}.")
    webhook_target(url)  # raises WebhookURLRefused with the reason
    with transaction.atomic():
        webhook = Webhook.objects.create(
            user=None if tenant is not None else acting_user, tenant=tenant, url=url.strip(),
            secret=secrets.token_hex(32), kinds=kinds, created_by=acting_user)
        audit_record(actor=acting_user, action="notifications.webhook_create", tenant=tenant,
                     target=f"webhook {webhook.pk}", after=_webhook_audit(webhook))
    log.info("webhook %s created for %s (host %s)", webhook.pk,
             tenant.name if tenant is not None else acting_user.label, url_host(webhook.url))
    return webhook


def webhook_delete(*, acting_user: Any, webhook: Webhook) -> None:
    with transaction.atomic():
        audit_record(actor=acting_user, action="notifications.webhook_delete",
                     tenant=webhook.tenant, target=f"webhook {webhook.pk}",
                     before=_webhook_audit(webhook))
        webhook.delete()


def webhook_test(*, webhook: Webhook) -> PostResult:
    """Send a signed test POST now (the receiver's answer is the caller's to see)."""
    return webhook_post(webhook, webhook_test_payload(webhook), event="test")
