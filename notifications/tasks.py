"""Handing notifications to the outside channels, after the commit and away from the caller.

- notifications_dispatch_task(key): claims each new notification of an event once
  (dispatched_at), then per recipient and channel they want: an e-mail, a POST to each webhook
  (theirs and their project's) — each a Delivery row, made once.
- webhook_post_task(delivery_id): the signed JSON POST (a notification's, or a test's), retried
  with exponential back-off while the receiver is down or answers 5xx/429
  (PORTAL_WEBHOOK_RETRIES times), then marked failed; the webhook's failures in a row decide
  whether it is disabled (services.delivery_failed). A project's webhook posts only while its
  creator is one of the project's managers (services.webhook_hold otherwise).
- notifications_dispatch_stale: the beat's sweep for events whose task never ran (the broker
  was away at the commit).

All of them run on the `notifications` queue (portal/celery.py), on workers of their own.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.tasks import BoundTask, bound_task, send_on_commit, task
from identity.client import KeystoneError

from .models import Channel, Delivery, Notification, Webhook
from .selectors import channels_for, webhook_creator_manages
from .services import (
    delivery_attempt_failed,
    delivery_failed,
    delivery_sent,
    delivery_skip,
    webhook_hold,
)
from .webhooks import webhook_payload, webhook_post, webhook_test_payload

log = logging.getLogger(__name__)

STALE_SECONDS = 60


class ReceiverUnavailable(Exception):
    """The webhook's receiver did not take the POST (down, timed out, 5xx, 429): try later."""


@task(ignore_result=True)
def notifications_dispatch_task(key: str) -> int:
    """Hand out the undispatched notifications of one event; returns how many."""
    return sum(_dispatch(notification) for notification in Notification.objects.filter(
        key=key, dispatched_at__isnull=True).select_related("user", "tenant"))


@task(ignore_result=True)
def notifications_dispatch_stale() -> int:
    """The beat's sweep: notifications older than a minute that no task handed out."""
    since = timezone.now() - dt.timedelta(seconds=STALE_SECONDS)
    return sum(_dispatch(notification) for notification in Notification.objects.filter(
        dispatched_at__isnull=True, created_at__lt=since).select_related("user", "tenant")[:1000])


def _dispatch(notification: Notification) -> int:
    if not Notification.objects.filter(pk=notification.pk, dispatched_at__isnull=True).update(
            dispatched_at=timezone.now()):
        return 0  # another worker has it
    # the claim is this worker's alone: the deliveries below are made once, by it
    wanted = channels_for(notification.user, notification.kind)
    deliveries = []
    if Channel.EMAIL in wanted and settings.EMAIL_HOST and notification.user.email:
        deliveries.append(Delivery(notification=notification, channel=Channel.EMAIL))
    if Channel.WEBHOOK in wanted:
        deliveries += [Delivery(notification=notification, channel=Channel.WEBHOOK, webhook=hook)
                       for hook in _webhooks_for(notification)]
    if deliveries:
        with transaction.atomic():
            for delivery in Delivery.objects.bulk_create(deliveries):
                send_on_commit("notifications.tasks.email_send_task" if delivery.webhook is None
                               else "notifications.tasks.webhook_post_task", delivery.pk)
    return 1


def _webhooks_for(notification: Notification) -> list[Webhook]:
    owners = Q(user=notification.user)
    if notification.tenant_id:
        owners |= Q(tenant_id=notification.tenant_id)
    return [hook for hook in Webhook.objects.filter(owners, state=Webhook.State.ACTIVE)
            if not hook.kinds or notification.kind in hook.kinds]


@task(ignore_result=True)
def email_send_task(delivery_id: int) -> None:
    delivery = Delivery.objects.select_related("notification__user", "notification__tenant").filter(
        pk=delivery_id).first()
    if delivery is None or delivery.state != Delivery.State.PENDING \
            or delivery.notification is None:
        return  # sent already, or gone with its notification (its user was deleted)
    notification = delivery.notification
    body = f"Hello {notification.user.label},\n\n{notification.text}\n"
    if notification.link:
        body += f"\n{settings.PORTAL_PUBLIC_URL.rstrip('/')}{notification.link}\n"
    delivery.attempts += 1
    try:
        send_mail(f"[GPU portal] {notification.title}", body, settings.DEFAULT_FROM_EMAIL,
                  [notification.user.email])
    except Exception as exc:  # noqa: BLE001 - a mail server's failure is recorded, not raised
        delivery_failed(delivery=delivery, error=str(exc), status=None)
    else:
        delivery_sent(delivery=delivery, status=None)


@bound_task(ignore_result=True, autoretry_for=(ReceiverUnavailable,),
            retry_backoff=settings.PORTAL_WEBHOOK_RETRY_BACKOFF_SECONDS, retry_backoff_max=600,
            retry_jitter=True, max_retries=settings.PORTAL_WEBHOOK_RETRIES)
def webhook_post_task(self: BoundTask, delivery_id: int) -> None:
    delivery = Delivery.objects.select_related(
        "webhook__user", "webhook__tenant", "webhook__created_by", "notification__user",
        "notification__tenant").filter(pk=delivery_id).first()
    if delivery is None or delivery.state != Delivery.State.PENDING or delivery.webhook is None:
        return
    webhook = delivery.webhook
    if not delivery.test:  # a test goes out whatever the state: someone asked for it now
        if webhook.state != Webhook.State.ACTIVE:
            delivery_skip(delivery=delivery, reason=f"the webhook is {webhook.state}")
            return
        try:
            manages = webhook_creator_manages(webhook)
        except KeystoneError as exc:
            _attempt_failed(self, delivery, f"the project's managers cannot be asked of "
                                            f"Keystone now ({type(exc).__name__})", None,
                            counts=False)
            return
        if not manages:
            webhook_hold(webhook=webhook)
            delivery_skip(delivery=delivery, reason="the webhook waits for a project manager's "
                                                    "confirmation")
            return
    delivery.attempts += 1
    if delivery.test:
        result = webhook_post(webhook, webhook_test_payload(webhook), event="test")
    else:
        assert delivery.notification is not None  # the model's check: a test, or a notification
        result = webhook_post(webhook, webhook_payload(delivery.notification),
                              event=delivery.notification.kind)
    # each record below finds the delivery gone when its webhook was deleted during the POST
    # (the delivery with it): the task ends there, nothing to retry or to count
    if result.retry:
        _attempt_failed(self, delivery, result.error, result.status)
    elif result.sent:
        delivery_sent(delivery=delivery, status=result.status)
    else:  # 4xx, a redirect, a refused address: sending it again changes nothing
        delivery_failed(delivery=delivery, error=result.error, status=result.status)


def _attempt_failed(task_: BoundTask, delivery: Delivery, error: str, status: int | None, *,
                    counts: bool = True) -> None:
    if task_.max_retries is not None and task_.request.retries >= task_.max_retries:
        delivery_failed(delivery=delivery, error=error, status=status, counts=counts)
        return
    if not delivery_attempt_failed(delivery=delivery, error=error, status=status):
        return
    log.info("webhook delivery %s: %s; retrying", delivery.pk, error)
    raise ReceiverUnavailable(error)
