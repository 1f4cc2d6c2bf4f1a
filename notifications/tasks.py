"""Handing notifications to the outside channels, after the commit and away from the caller.

- notifications_dispatch_task(key): claims each new notification of an event once
  (dispatched_at), then per recipient and channel they want: an e-mail, a POST to each webhook
  (theirs and their project's) — each a Delivery row, made once.
- webhook_post_task(delivery_id): the signed JSON POST, retried with exponential back-off while
  the receiver is down or answers 5xx/429 (PORTAL_WEBHOOK_RETRIES times), then marked failed.
- notifications_dispatch_stale: the beat's sweep for events whose task never ran (the broker
  was away at the commit).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core.tasks import send_on_commit, task

from .models import Channel, Delivery, Notification, Webhook
from .selectors import channels_for
from .webhooks import webhook_payload, webhook_post

log = logging.getLogger(__name__)

STALE_SECONDS = 60


class ReceiverUnavailable(Exception):
    """The webhook's receiver did not take the POST (down, timed out, 5xx, 429): try later."""


@task(ignore_result=True)
def notifications_dispatch_task(key: str) -> int:
    """Hand out the undispatched notifications of one event; returns how many."""
    handed = 0
    for pk in list(Notification.objects.filter(key=key, dispatched_at__isnull=True)
                   .values_list("pk", flat=True)):
        handed += _dispatch(pk)
    return handed


@task(ignore_result=True)
def notifications_dispatch_stale() -> int:
    """The beat's sweep: notifications older than a minute that no task handed out."""
    since = timezone.now() - dt.timedelta(seconds=STALE_SECONDS)
    handed = 0
    for pk in list(Notification.objects.filter(dispatched_at__isnull=True, created_at__lt=since)
                   .values_list("pk", flat=True)[:1000]):
        handed += _dispatch(pk)
    return handed


def _dispatch(pk: int) -> int:
    if not Notification.objects.filter(pk=pk, dispatched_at__isnull=True).update(
            dispatched_at=timezone.now()):
        return 0  # another worker has it
    notification = Notification.objects.select_related("user", "tenant").get(pk=pk)
    wanted = channels_for(notification.user, notification.kind)
    if Channel.EMAIL in wanted and settings.EMAIL_HOST and notification.user.email:
        delivery = _delivery(notification, Channel.EMAIL, None)
        if delivery is not None:
            send_on_commit(email_send_task, delivery.pk)
    if Channel.WEBHOOK in wanted:
        for webhook in _webhooks_for(notification):
            delivery = _delivery(notification, Channel.WEBHOOK, webhook)
            if delivery is not None:
                send_on_commit(webhook_post_task, delivery.pk)
    return 1


def _webhooks_for(notification: Notification) -> list[Webhook]:
    owners = Q(user=notification.user)
    if notification.tenant_id:
        owners |= Q(tenant_id=notification.tenant_id)
    return [hook for hook in Webhook.objects.filter(owners, active=True)
            if not hook.kinds or notification.kind in hook.kinds]


def _delivery(notification: Notification, channel: str, webhook: Webhook | None
              ) -> Delivery | None:
    try:
        with transaction.atomic():
            return Delivery.objects.create(notification=notification, channel=channel,
                                           webhook=webhook)
    except IntegrityError:
        return None  # made already


@task(ignore_result=True)
def email_send_task(delivery_id: int) -> None:
    delivery = Delivery.objects.select_related("notification__user", "notification__tenant").get(
        pk=delivery_id)
    if delivery.state != Delivery.State.PENDING:
        return
    notification = delivery.notification
    body = f"Hello {notification.user.username},\n\n{notification.text}\n"
    if notification.link:
        body += f"\n{settings.PORTAL_PUBLIC_URL.rstrip('/')}{notification.link}\n"
    delivery.attempts += 1
    try:
        send_mail(f"[GPU portal] {notification.title}", body, settings.DEFAULT_FROM_EMAIL,
                  [notification.user.email])
    except Exception as exc:  # noqa: BLE001 - a mail server's failure is logged, not raised
        log.warning("notification %s: e-mail not sent: %s", notification.pk, exc)
        delivery.state, delivery.last_error = Delivery.State.FAILED, str(exc)[:2000]
    else:
        delivery.state, delivery.sent_at = Delivery.State.SENT, timezone.now()
    delivery.save(update_fields=["state", "attempts", "last_error", "sent_at"])


@shared_task(bind=True, ignore_result=True, autoretry_for=(ReceiverUnavailable,),
             retry_backoff=True, retry_backoff_max=600, retry_jitter=True,
             max_retries=settings.PORTAL_WEBHOOK_RETRIES)
def webhook_post_task(self, delivery_id: int) -> None:
    delivery = Delivery.objects.select_related(
        "webhook", "notification__user", "notification__tenant").get(pk=delivery_id)
    if delivery.state != Delivery.State.PENDING or delivery.webhook is None:
        return
    delivery.attempts += 1
    result = webhook_post(delivery.webhook, webhook_payload(delivery.notification),
                          event=delivery.notification.kind)
    if result.retry:
        _attempt_failed(self, delivery, result.error, result.status)
        return
    delivery.last_status = result.status
    if result.sent:
        delivery.state, delivery.sent_at, delivery.last_error = (
            Delivery.State.SENT, timezone.now(), "")
    else:  # 4xx, a redirect, a refused address: sending it again changes nothing
        delivery.state, delivery.last_error = Delivery.State.FAILED, result.error[:2000]
        log.warning("webhook delivery %s failed: %s", delivery.pk, result.error)
    delivery.save(update_fields=["state", "attempts", "last_status", "last_error", "sent_at"])


def _attempt_failed(task_: Any, delivery: Delivery, error: str, status: int | None) -> None:
    delivery.last_error, delivery.last_status = error[:2000], status
    last = task_.request.retries >= task_.max_retries
    if last:
        delivery.state = Delivery.State.FAILED
    delivery.save(update_fields=["state", "attempts", "last_status", "last_error"])
    if not last:
        log.info("webhook delivery %s: %s; retrying", delivery.pk, error)
        raise ReceiverUnavailable(error)
    log.warning("webhook delivery %s failed for good after %s tries: %s", delivery.pk,
                delivery.attempts, error)
