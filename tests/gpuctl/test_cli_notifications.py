"""gpuctl notifications and gpuctl webhook against a live portal and the real Keystone."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from gpuctl import cli
from notifications.models import Delivery, Kind, Notification, Webhook
from notifications.services import notify
from notifications.tasks import webhook_post_task
from tenants.models import Tenant
from tests.notifications.conftest import Receiver
from tests.support.gpuctl import openrc, run

live = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def env(live_server, keystone):
    env = openrc(keystone, live_server)
    code, _, err = run(["whoami"], env)  # first contact records the user and the tenant
    assert code == 0, err
    return env


def tell(key: str, kind: str = Kind.FAILED) -> Notification:
    user = get_user_model().objects.get(name="researcher")
    notify(kind=kind, users=[user], tenant=None, title=f"{key} failed", text="OOMKilled",
           key=key, workload_id=3)
    return Notification.objects.get(user=user, key=key)


@pytest.mark.parametrize("argv", [["notifications", "--help"], ["webhook", "--help"]])
def test_help(argv, capsys):
    assert cli.main(argv) == 0
    assert "usage: gpuctl" in capsys.readouterr().out


def test_usage_errors_exit_2():
    assert run(["webhook", "frobnicate"], {})[0] == 2


@live
def test_list_read_and_read_all(env):
    first, second = tell("one"), tell("two")
    code, out, err = run(["notifications"], env)
    assert code == 0, err
    assert out.splitlines()[0].split()[:4] == ["ID", "READ", "KIND", "TITLE"]
    assert "two failed" in out and "one failed" in out
    assert run(["notifications", "read", str(first.pk)], env)[:2] == (
        0, f"notification {first.pk} read\n")
    code, out, _ = run(["notifications", "--unread", "--json"], env)
    assert [row["id"] for row in json.loads(out)] == [second.pk]
    assert run(["notifications", "read", "--all"], env)[1] == "1 marked read\n"
    assert not Notification.objects.filter(read_at__isnull=True).exists()
    code, _, err = run(["notifications", "read"], env)
    assert code == 2 and "one of the arguments ID --all is required" in err
    code, _, err = run(["notifications", "read", "999999"], env)
    assert code == 6


@live
def test_preferences_show_and_set(env):
    code, out, _ = run(["notifications", "preferences"], env)
    assert code == 0
    assert out.splitlines()[0].split() == ["KIND", "PORTAL", "EMAIL", "WEBHOOK"]
    started = next(line for line in out.splitlines() if line.startswith("started"))
    assert started.split() == ["started", "on", "off", "on"]
    code, out, _ = run(["notifications", "preferences", "--set", "started.email=on",
                        "--set", "failed.webhook=off", "--json"], env)
    assert code == 0
    assert json.loads(out)["started"]["email"] is True
    assert json.loads(out)["failed"]["webhook"] is False
    code, _, err = run(["notifications", "preferences", "--set", "started.pager=on"], env)
    assert code == 1 and "Unknown channel" in err
    code, _, err = run(["notifications", "preferences", "--set", "started"], env)
    assert code == 2 and "KIND.CHANNEL=on|off" in err


@live
def test_webhook_add_prints_the_secret_once_then_list_test_delete(env, settings, eager_celery):
    """`webhook test` waits for the queued delivery's answer (the worker's task runs inline
    here, after the request's commit)."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    receiver = Receiver()
    try:
        code, out, err = run(["webhook", "add", receiver.url, "--kind", "failed"], env)
        assert code == 0, err
        hook = Webhook.objects.get()
        assert hook.secret in out and "shown this once" in out
        code, out, _ = run(["webhook", "list"], env)
        assert hook.secret not in out and receiver.url in out
        assert out.splitlines()[0].split() == ["ID", "PROJECT", "KINDS", "STATE", "URL"]
        assert run(["webhook", "test", str(hook.pk)], env)[1] == "delivered (200)\n"
        assert receiver.received[0].json["kind"] == "test"
        receiver.statuses = [503] * (webhook_post_task.max_retries + 1)
        code, out, _ = run(["webhook", "test", str(hook.pk)], env)
        assert code == 1 and out == "not delivered: answered 503\n"
        assert run(["webhook", "delete", str(hook.pk)], env)[0] == 0
        assert not Webhook.objects.exists()
    finally:
        receiver.stop()


@live
def test_webhook_test_gives_up_after_its_timeout_and_enable_confirm(env, keystone,
                                                                     live_server):
    """No notifications worker runs: the test stays queued, gpuctl says so and exits 5. A
    disabled webhook is enabled; a project's is confirmed by a manager."""
    hook = Webhook.objects.create(user=get_user_model().objects.get(name="researcher"),
                                  url="https://93.184.215.14/x", secret="s" * 64,
                                  state=Webhook.State.DISABLED, failures=10)
    code, out, _ = run(["webhook", "test", str(hook.pk), "--timeout", "0.5",
                        "--interval", "0.1"], env)
    delivery = Delivery.objects.get(webhook=hook)
    assert code == 5 and out.startswith(f"still pending after 0.5 s (delivery {delivery.pk};")
    code, out, _ = run(["webhook", "list"], env)
    assert out.splitlines()[1].split()[0] == str(hook.pk) and "disabled" in out.splitlines()[1]
    assert run(["webhook", "enable", str(hook.pk)], env)[1] == f"webhook {hook.pk}: active\n"
    vision = Tenant.objects.get(name="vision-lab")
    held = Webhook.objects.create(tenant=vision, url="https://93.184.215.14/x", secret="s" * 64,
                                  state=Webhook.State.NEEDS_CONFIRMATION)
    assert run(["webhook", "confirm", str(held.pk)], env)[0] == 1  # a member
    lead = openrc(keystone, live_server, user="lead")
    assert run(["webhook", "confirm", str(held.pk)], lead)[1] == f"webhook {held.pk}: active\n"


@live
def test_webhook_refusals(env, keystone, live_server):
    code, _, err = run(["webhook", "add", "http://169.254.169.254/latest/"], env)
    assert code == 1 and "link-local" in err
    code, _, err = run(["webhook", "add", "https://93.184.215.14/x", "--project"], env)
    assert code == 1 and "managers" in err  # researcher is a member of vision-lab
    lead = openrc(keystone, live_server, user="lead")
    code, out, err = run(["webhook", "add", "https://93.184.215.14/x", "--project"], lead)
    assert code == 0, err
    code, out, _ = run(["webhook", "list", "--json"], env)
    [row] = json.loads(out)
    assert row["project"] == "vision-lab" and row["url"] is None
    assert run(["webhook", "delete", str(row["id"])], env)[0] == 1
