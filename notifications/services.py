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
from django.db.models import F
from django.utils import timezone

from audit.services import audit_record
from core.tasks import send_on_commit
from core.validation import FieldsInvalid
from tenants.models import Tenant

from .models import Channel, Delivery, Kind, Notification, NotificationPreference, Webhook
from .selectors import project_managers
from .webhook_urls import url_host, webhook_target

log = logging.getLogger(__name__)


_STATES_SQL = """
SELECT u.id, u.email,
  EXISTS (SELECT 1 FROM {notification} n WHERE n.user_id = u.id AND n.key = %s),
  EXISTS (SELECT 1 FROM {preference} p WHERE p.user_id = u.id AND p.kind = %s
          AND p.channel = %s AND NOT p.enabled),
  EXISTS (SELECT 1 FROM {webhook} w WHERE w.state = %s AND (w.user_id = u.id OR w.tenant_id = %s))
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
        cursor.execute(sql, [key, kind, Channel.PORTAL, Webhook.State.ACTIVE, tenant_id, *ids])
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
        send_on_commit("notifications.tasks.notifications_dispatch_task", key)
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


class WebhookLimitReached(Exception):
    """The user (or the project) has as many webhooks as PORTAL_WEBHOOKS_PER_* allows."""


class WebhookStateRefused(Exception):
    """The change does not apply to the webhook as it is (the message says what does)."""


def _webhook_limit_refusal(*, acting_user: Any, tenant: Any | None) -> str | None:
    """Why one more webhook is refused, or None. Called with the owner's row locked, so two
    creations at once cannot both take the last place."""
    if tenant is not None:
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
        limit, have = settings.PORTAL_WEBHOOKS_PER_PROJECT, Webhook.objects.filter(
            tenant=tenant).count()
        whose = f"the project {tenant.name} has"
    else:
        get_user_model().objects.select_for_update().filter(pk=acting_user.pk).first()
        limit, have = settings.PORTAL_WEBHOOKS_PER_USER, Webhook.objects.filter(
            user=acting_user).count()
        whose = "you have"
    if have < limit:
        return None
    return (f"A webhook limit is reached: {whose} {have} of at most {limit} "
            f"(PORTAL_WEBHOOKS_PER_{'PROJECT' if tenant is not None else 'USER'}). "
            "Delete one first.")


def webhook_create(*, acting_user: Any, url: str, kinds: Iterable[str] = (),
                   tenant: Any | None = None) -> Webhook:
    """A webhook of `acting_user`'s own, or of `tenant` (the caller checked that they may manage
    the project's). The URL is checked against SSRF here (WebhookURLRefused) and again at each
    POST; a user or project past its number of webhooks is refused (WebhookLimitReached). The
    secret is the caller's to see once, from the returned row."""
    kinds = sorted(set(kinds))
    unknown = [kind for kind in kinds if kind not in Kind.values]
    if unknown:
        raise ValueError(f"Unknown kinds: {', '.join(unknown)}.")
    webhook_target(url)  # raises WebhookURLRefused with the reason
    with transaction.atomic():
        refusal = _webhook_limit_refusal(acting_user=acting_user, tenant=tenant)
        if refusal is not None:
            raise WebhookLimitReached(refusal)
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


def webhook_test(*, acting_user: Any, webhook: Webhook) -> Delivery:
    """Queue a signed test POST (a Delivery, `test`): the webhook workers send it, the caller
    polls the delivery for the receiver's answer. Sent whatever the webhook's state: an owner
    tests a disabled webhook before enabling it again."""
    with transaction.atomic():
        delivery = Delivery.objects.create(channel=Channel.WEBHOOK, webhook=webhook, test=True)
        audit_record(actor=acting_user, action="notifications.webhook_test",
                     tenant=webhook.tenant, target=f"webhook {webhook.pk}",
                     after={"delivery": delivery.pk})
        send_on_commit("notifications.tasks.webhook_post_task", delivery.pk)
    return delivery


def _state_change(*, acting_user: Any, webhook: Webhook, action: str, **changes: Any) -> Webhook:
    before = {"state": webhook.state, "failures": webhook.failures,
              "confirmed_by": webhook.created_by.label if webhook.created_by else None}
    with transaction.atomic():
        Webhook.objects.filter(pk=webhook.pk).update(
            state=Webhook.State.ACTIVE, failures=0, state_changed_at=timezone.now(), **changes)
        webhook.refresh_from_db()
        audit_record(actor=acting_user, action=action, tenant=webhook.tenant,
                     target=f"webhook {webhook.pk}", before=before,
                     after={"state": webhook.state, "failures": 0,
                            "confirmed_by": webhook.created_by.label
                            if webhook.created_by else None})
    return webhook


def webhook_enable(*, acting_user: Any, webhook: Webhook) -> Webhook:
    """Deliveries go out again and the failures in a row count from 0 (its owner, a project's
    manager: the caller checked). A project's webhook waiting for a confirmation needs that
    instead (WebhookStateRefused)."""
    if webhook.state == Webhook.State.NEEDS_CONFIRMATION:
        raise WebhookStateRefused("This webhook waits for a project manager's confirmation "
                                  "(confirm it: POST …/confirm/); enabling does not apply.")
    return _state_change(acting_user=acting_user, webhook=webhook,
                         action="notifications.webhook_enable")


def webhook_confirm(*, acting_user: Any, webhook: Webhook) -> Webhook:
    """A project manager takes a project's webhook on: it posts the project's news while they
    are a manager (they become its `created_by`), whatever its state was."""
    if webhook.tenant is None:
        raise WebhookStateRefused("Only a project's webhook is confirmed; yours is enabled "
                                  "(POST …/enable/).")
    return _state_change(acting_user=acting_user, webhook=webhook, created_by=acting_user,
                         action="notifications.webhook_confirm")


# --- what the webhook workers record (notifications.tasks) -----------------------------------

def _owners(webhook: Webhook) -> list[Any]:
    """Who hears about a webhook's state: its user; a project's managers (else who made it)."""
    if webhook.tenant is None:
        return [webhook.user] if webhook.user is not None else []
    return project_managers(webhook.tenant) or (
        [webhook.created_by] if webhook.created_by is not None else [])


def _webhook_notice(webhook: Webhook, users: list[Any], *, event: str, title: str,
                    text: str) -> int:
    stamp = int(webhook.state_changed_at.timestamp()) if webhook.state_changed_at else 0
    return notify(kind=Kind.WEBHOOK, users=users, tenant=webhook.tenant, title=title, text=text,
                  key=f"webhook-{event}:{webhook.pk}:{stamp}",
                  link=f"/notifications/preferences/#webhook-{webhook.pk}")


def _delivery_record(delivery: Delivery, **fields: Any) -> bool:
    """Write what became of a pending delivery, if it is still there to write to: its webhook
    (or its notification, with its user) may have been deleted while a worker was sending it,
    and the delivery with it. False then, or when another worker recorded it first; the
    caller has nothing more to do."""
    for name, value in fields.items():
        setattr(delivery, name, value)
    return bool(Delivery.objects.filter(pk=delivery.pk, state=Delivery.State.PENDING)
                .update(**fields))


def delivery_attempt_failed(*, delivery: Delivery, error: str, status: int | None) -> bool:
    """A try that the receiver did not take, to be retried; False: the delivery is gone."""
    return _delivery_record(delivery, attempts=delivery.attempts, last_error=error[:2000],
                            last_status=status)


def delivery_skip(*, delivery: Delivery, reason: str) -> bool:
    """Not sent: the webhook is not active (it does not count as a failure)."""
    return _delivery_record(delivery, state=Delivery.State.SKIPPED, last_error=reason)


def delivery_sent(*, delivery: Delivery, status: int | None) -> bool:
    """The receiver (or the mail server) took it: the webhook's failures in a row start again
    from 0. False: the delivery is gone."""
    with transaction.atomic():
        if not _delivery_record(delivery, state=Delivery.State.SENT, sent_at=timezone.now(),
                                last_error="", last_status=status, attempts=delivery.attempts):
            return False
        if delivery.webhook_id is not None:
            Webhook.objects.filter(pk=delivery.webhook_id).exclude(failures=0).update(
                failures=0)
    return True


def delivery_failed(*, delivery: Delivery, error: str, status: int | None,
                    counts: bool = True) -> bool:
    """The delivery failed for good (after its retries, or at once for an answer a retry does
    not change). `counts`: the receiver's failure (not the portal's: Keystone unable to say
    whether a project's webhook may post). The webhook's failures in a row reach
    PORTAL_WEBHOOK_DISABLE_AFTER: it is disabled and its owner told (True). A delivery that is
    gone (its webhook deleted meanwhile) counts for nothing."""
    with transaction.atomic():
        if not _delivery_record(delivery, state=Delivery.State.FAILED, last_error=error[:2000],
                                last_status=status, attempts=delivery.attempts):
            return False
        log.warning("%s delivery %s failed after %s tries: %s", delivery.channel, delivery.pk,
                    delivery.attempts, error[:200])
        limit = settings.PORTAL_WEBHOOK_DISABLE_AFTER
        if not counts or delivery.webhook_id is None:
            return False
        hooks = Webhook.objects.filter(pk=delivery.webhook_id)
        hooks.update(failures=F("failures") + 1)
        if not limit or not hooks.filter(state=Webhook.State.ACTIVE, failures__gte=limit).update(
                state=Webhook.State.DISABLED, state_changed_at=timezone.now()):
            return False
        webhook = hooks.select_related("user", "tenant", "created_by").get()
        audit_record(actor=None, action="notifications.webhook_disable", tenant=webhook.tenant,
                     target=f"webhook {webhook.pk}",
                     after={"state": webhook.state, "failures": webhook.failures})
    log.warning("webhook %s disabled after %s failed deliveries in a row", webhook.pk,
                webhook.failures)
    # after the commit: who manages a project is asked of Keystone, outside the transaction
    _webhook_notice(
        webhook, _owners(webhook), event="disabled",
        title=f"Webhook {webhook.pk} disabled: its deliveries kept failing",
        text=f"The webhook to {url_host(webhook.url)} failed {webhook.failures} deliveries in "
             f"a row (the last: {error[:200]}), so the portal stopped sending to it. Once the "
             "receiver works, send a test and enable it again.")
    return True


def webhook_hold(*, webhook: Webhook) -> bool:
    """A project's webhook whose creator is no longer a manager stops (`needs_confirmation`)
    until a manager confirms it; the project's managers are told, once (True: this call made
    the change)."""
    tenant = webhook.tenant
    assert tenant is not None, "only a project's webhook waits for a manager"
    with transaction.atomic():
        if not Webhook.objects.filter(pk=webhook.pk, state=Webhook.State.ACTIVE).update(
                state=Webhook.State.NEEDS_CONFIRMATION, state_changed_at=timezone.now()):
            return False
        webhook.refresh_from_db()
        creator = webhook.created_by.label if webhook.created_by else "its creator"
        audit_record(actor=None, action="notifications.webhook_hold", tenant=webhook.tenant,
                     target=f"webhook {webhook.pk}",
                     after={"state": webhook.state, "creator": creator})
    managers = project_managers(tenant)
    log.warning("webhook %s of %s held: its creator is no longer a manager (%s managers told)",
                webhook.pk, tenant.name, len(managers))
    _webhook_notice(
        webhook, managers, event="needs-confirmation",
        title=f"Webhook {webhook.pk} of {tenant.name} waits for your confirmation",
        text=f"{creator} set up this project's webhook to {url_host(webhook.url)} and is no "
             "longer one of its managers, so the project's notifications stopped going there. "
             "A manager who wants them to go on confirms it.")
    return True
