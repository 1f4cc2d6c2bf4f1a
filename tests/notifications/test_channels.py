"""notify() and the channels: exactly once per user and event, the preferences filtering each
channel, the signed webhook POST to a real receiver on loopback, retries and their limits."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.test import TestCase

from audit.models import AuditRecord
from notifications.models import Channel, Delivery, Kind, Notification, Webhook
from notifications.services import (
    notify,
    preferences_set,
    webhook_create,
    webhook_delete,
    webhook_test,
)
from notifications.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_valid
from notifications.tasks import email_send_task, webhook_post_task
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def mailer(settings):
    """E-mail on: Django's locmem backend (pytest-django's), with a mail host named so that the
    dispatch task sends."""
    settings.EMAIL_HOST = "mail.example.org"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox.clear()
    return mail.outbox


def finished(user, *, key: str = "finished:7", tenant=None) -> int:
    return notify(kind=Kind.FINISHED, users=[user], tenant=tenant, title="training finished",
                  text="Your workload training finished (exit code 0).", key=key,
                  workload_id=7, link="/workloads/7/")


def sent(callback_runner, fn, *args, **kwargs):
    """Run `fn` and the tasks its commit hands out, inline (eager Celery)."""
    with callback_runner(execute=True):
        return fn(*args, **kwargs)


def test_an_event_told_twice_is_one_notification_and_one_delivery_each(
        people, receiver, mailer, eager_celery):
    ada = people["ada"]
    webhook_create(acting_user=ada, url=receiver.url)
    assert sent(TestCase.captureOnCommitCallbacks, finished, ada) == 1
    assert sent(TestCase.captureOnCommitCallbacks, finished, ada) == 0
    assert Notification.objects.filter(user=ada).count() == 1
    assert sorted(Delivery.objects.values_list("channel", "state")) == [
        ("email", "sent"), ("webhook", "sent")]
    assert len(receiver.received) == 1 and len(mailer) == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_senders_of_one_event_make_one_row_one_dispatch_one_post(
        receiver, eager_celery):
    """Two threads, each its own database connection, tell the same event at once."""
    ada = get_user_model().objects.create(username="ada", keystone_user_id="ks-ada",
                                          email="ada@example.org")
    webhook_create(acting_user=ada, url=receiver.url)
    start = threading.Barrier(2)
    results: list[int] = []
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            start.wait(10)
            results.append(finished(ada))
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert Notification.objects.filter(user=ada).count() == 1
    assert Delivery.objects.filter(channel=Channel.WEBHOOK).count() == 1
    assert len(receiver.received) == 1
    assert Notification.objects.get(user=ada).dispatched_at is not None


def test_portal_off_arrives_read(people):
    ada = people["ada"]
    preferences_set(user=ada, choices={(Kind.FINISHED, Channel.PORTAL): False})
    finished(ada)
    finished(people["bob"])
    assert Notification.objects.get(user=ada).read_at is not None
    assert Notification.objects.get(user=people["bob"]).read_at is None


def test_email_follows_the_preference_and_the_defaults(people, mailer, eager_celery):
    ada, bob = people["ada"], people["bob"]
    preferences_set(user=ada, choices={(Kind.FINISHED, Channel.EMAIL): False})
    sent(TestCase.captureOnCommitCallbacks, notify, kind=Kind.FINISHED, users=[ada, bob],
         tenant=None, title="training finished", text="done", key="finished:1")
    assert [message.to for message in mailer] == [["bob@example.org"]]
    assert "done" in mailer[0].body
    # no e-mail for a start the user watches on the page (the default)
    sent(TestCase.captureOnCommitCallbacks, notify, kind=Kind.STARTED, users=[bob],
         tenant=None, title="training started", text="running", key="started:1")
    assert len(mailer) == 1


def test_a_webhooks_kinds_and_its_owners_preference_filter_it(people, receiver, eager_celery):
    ada, bob = people["ada"], people["bob"]
    webhook_create(acting_user=ada, url=receiver.url, kinds=[Kind.FAILED])
    webhook_create(acting_user=bob, url=receiver.url)
    preferences_set(user=bob, choices={(Kind.FINISHED, Channel.WEBHOOK): False})
    sent(TestCase.captureOnCommitCallbacks, notify, kind=Kind.FINISHED, users=[ada, bob],
         tenant=None, title="finished", text="", key="finished:2")
    assert receiver.received == []  # ada's hook wants failures only; bob turned webhooks off
    sent(TestCase.captureOnCommitCallbacks, notify, kind=Kind.FAILED, users=[ada, bob],
         tenant=None, title="failed", text="OOMKilled", key="failed:2")
    assert [r.json["kind"] for r in receiver.received] == ["failed", "failed"]


def test_a_projects_webhook_gets_its_peoples_notifications_once_per_person(
        people, receiver, eager_celery, login):
    login("lead")  # vision-lab's manager, as the portal records him
    lead, vision = get_user_model().objects.get(name="lead"), Tenant.objects.get(
        name="vision-lab")
    webhook_create(acting_user=lead, url=receiver.url, tenant=vision)
    sent(TestCase.captureOnCommitCallbacks, notify, kind=Kind.FAILED,
         users=[people["ada"], people["bob"]], tenant=vision, title="failed", text="",
         key="failed:9")
    assert sorted(r.json["user"] for r in receiver.received) == ["ada", "bob"]
    assert {r.json["project"] for r in receiver.received} == {"vision-lab"}


def test_the_receiver_gets_signed_slack_compatible_json(people, receiver, eager_celery,
                                                        settings):
    settings.PORTAL_PUBLIC_URL = "https://gpu.example.org"
    hook = webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    [got] = receiver.received
    assert got.path == "/hooks/secret-path-T0KEN"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-GPU-Portal-Event"] == "finished"
    assert signature_valid(hook.secret, got.headers[TIMESTAMP_HEADER], got.body,
                           got.headers[SIGNATURE_HEADER], now=int(time.time()))
    assert not signature_valid("another-secret", got.headers[TIMESTAMP_HEADER], got.body,
                               got.headers[SIGNATURE_HEADER], now=int(time.time()))
    body = got.json
    assert body["text"] == ("*training finished*\nYour workload training finished (exit code "
                            "0).\nhttps://gpu.example.org/workloads/7/")
    assert (body["kind"], body["workload"], body["user"]) == ("finished", 7, "ada")


def test_a_503_is_retried_until_the_receiver_takes_it(people, receiver, eager_celery):
    receiver.statuses = [503, 503]
    webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    delivery = Delivery.objects.get(channel=Channel.WEBHOOK)
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("sent", 3, 200)
    assert len(receiver.received) == 3


def test_a_4xx_is_not_retried(people, receiver, eager_celery):
    receiver.statuses = [404]
    webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    delivery = Delivery.objects.get(channel=Channel.WEBHOOK)
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("failed", 1, 404)
    assert len(receiver.received) == 1


def test_a_receiver_that_never_comes_back_fails_after_the_retries(people, receiver,
                                                                  eager_celery):
    receiver.statuses = [503] * (webhook_post_task.max_retries + 1)
    webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    delivery = Delivery.objects.get(channel=Channel.WEBHOOK)
    assert delivery.state == "failed"
    assert delivery.attempts == webhook_post_task.max_retries + 1
    assert delivery.last_error == "answered 503"


def test_a_redirect_is_not_followed(people, receiver, eager_celery):
    receiver.statuses = [302]
    webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    assert Delivery.objects.get(channel=Channel.WEBHOOK).state == "failed"
    assert len(receiver.received) == 1


def test_a_host_that_turned_private_is_refused_at_send_time(people, receiver, eager_celery,
                                                            settings):
    webhook_create(acting_user=people["ada"], url=receiver.url)
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False  # as if its DNS now answered loopback
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    delivery = Delivery.objects.get(channel=Channel.WEBHOOK)
    assert delivery.state == "failed" and "loopback" in delivery.last_error
    assert receiver.received == []


def test_no_url_secret_or_token_reaches_a_log_line(people, receiver, eager_celery, caplog):
    caplog.set_level(logging.DEBUG)
    hook = webhook_create(acting_user=people["ada"], url=receiver.url)
    receiver.statuses = [503, 400]
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    assert Delivery.objects.get(channel=Channel.WEBHOOK).attempts == 2
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "webhook delivery" in logged  # the retries were logged
    for secret in (hook.url, "secret-path-T0KEN", hook.secret):
        assert secret not in logged
    assert Webhook.objects.get().url == receiver.url


def test_a_webhook_failing_deliveries_in_a_row_is_disabled_and_its_owner_told(
        people, receiver, eager_celery, settings):
    """PORTAL_WEBHOOK_DISABLE_AFTER failures in a row (each a delivery failed for good): a
    success in between starts the count again; at the limit deliveries stop, the owner hears
    of it once, and re-enabling counts from 0."""
    from notifications.services import webhook_enable

    settings.PORTAL_WEBHOOK_DISABLE_AFTER = 3
    ada = people["ada"]
    hook = webhook_create(acting_user=ada, url=receiver.url, kinds=[Kind.FINISHED])
    receiver.statuses = [404, 404, 200, 404, 404, 404]
    for n in range(6):
        sent(TestCase.captureOnCommitCallbacks, finished, ada, key=f"finished:{n}")
        hook.refresh_from_db()
        if n < 5:
            assert hook.state == "active", n
    assert (hook.state, hook.failures) == ("disabled", 3)
    assert len(receiver.received) == 6
    [told] = Notification.objects.filter(user=ada, kind=Kind.WEBHOOK)
    assert "disabled" in told.title and "failed 3 deliveries in a row" in told.text
    assert receiver.url not in told.text and "secret-path-T0KEN" not in told.text
    assert AuditRecord.objects.filter(action="notifications.webhook_disable").count() == 1
    sent(TestCase.captureOnCommitCallbacks, finished, ada, key="finished:after")
    assert len(receiver.received) == 6  # disabled: nothing more is posted
    assert Delivery.objects.filter(webhook=hook).count() == 6
    webhook_enable(acting_user=ada, webhook=hook)
    sent(TestCase.captureOnCommitCallbacks, finished, ada, key="finished:again")
    hook.refresh_from_db()
    assert (hook.state, hook.failures, len(receiver.received)) == ("active", 0, 7)


def test_a_failing_receiver_costs_the_retries_and_no_more(people, receiver, eager_celery,
                                                           settings):
    """A receiver that is down gets 1 + PORTAL_WEBHOOK_RETRIES POSTs per notification (5 by
    default, where 9 were)."""
    assert settings.PORTAL_WEBHOOK_RETRIES == webhook_post_task.max_retries == 4
    receiver.statuses = [503] * 10
    webhook_create(acting_user=people["ada"], url=receiver.url)
    sent(TestCase.captureOnCommitCallbacks, finished, people["ada"])
    assert len(receiver.received) == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answer", [200, 503, 404])
def test_a_webhook_deleted_while_its_delivery_is_posted_ends_it_quietly(receiver, caplog,
                                                                        answer):
    """Its owner deletes the webhook (and with it the pending delivery) while the worker waits
    for the receiver's answer: whatever the answer (taken, to be retried, refused), the worker
    finds the delivery gone and ends there, nothing raised, retried or logged as a problem."""
    caplog.set_level(logging.INFO)
    ada = get_user_model().objects.create(username="ada", keystone_user_id="ks-ada")
    hook = webhook_create(acting_user=ada, url=receiver.url)
    delivery = webhook_test(acting_user=ada, webhook=hook)
    receiver.hang.set()
    receiver.statuses = [answer]
    raised: list[BaseException] = []

    def worker() -> None:
        try:
            webhook_post_task(delivery.pk)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            raised.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert receiver.hanging.wait(30), "the POST never reached the receiver"
        webhook_delete(acting_user=ada, webhook=hook)
    finally:
        receiver.release.set()
        thread.join(60)
    assert not thread.is_alive()
    assert raised == []
    assert not Delivery.objects.exists() and not Webhook.objects.exists()
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert problems == []
    assert receiver.answered == 1  # posted once, never again


def test_an_email_whose_notification_is_gone_ends_quietly(people, mailer, caplog):
    """The e-mail task of a delivery deleted before it ran (its user, and with them their
    notifications, deleted) finds nothing and ends without an error."""
    caplog.set_level(logging.INFO)
    ada = people["ada"]
    finished(ada)
    notification = Notification.objects.get(user=ada)
    delivery = Delivery.objects.create(notification=notification, channel=Channel.EMAIL)
    ada.delete()
    email_send_task(delivery.pk)
    assert mailer == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
