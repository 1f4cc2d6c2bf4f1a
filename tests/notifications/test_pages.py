"""The notifications pages, signed in through the real login form: the bell's count on every
page (one query), the list, mark read and mark all read (POST forms with CSRF), the
preferences table and the webhooks (the secret once, a project's URL to its managers only)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, TestCase
from django.test.utils import CaptureQueriesContext

from notifications.models import Delivery, Kind, Notification, NotificationPreference, Webhook
from notifications.services import notify
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://93.184.215.14/services/T000/B000/XXXXsecretXXXX"


@pytest.fixture(autouse=True)
def users(login):
    """researcher and student as the portal records them at their first login."""
    login("researcher"), login("student")


def tell(name: str, key: str) -> Notification:
    user = get_user_model().objects.get(name=name)
    notify(kind=Kind.FAILED, users=[user], tenant=None, title=f"{key} failed",
           text="OOMKilled", key=key, workload_id=5, link="/workloads/5/")
    return Notification.objects.get(user=user, key=key)


def bell(html: str) -> str:
    found = re.search(r'<a id="notifications-bell"[^>]*aria-label="Notifications: (\d+) unread"',
                      html)
    assert found, "no bell on the page"
    return found.group(1)


def test_the_bell_counts_unread_on_every_page_with_one_query(as_user):
    client = as_user("researcher")
    assert bell(client.get("/workloads/").content.decode()) == "0"
    first = tell("researcher", "a")
    tell("researcher", "b")
    tell("student", "c")  # someone else's
    for path in ("/workloads/", "/usage/", "/notifications/preferences/"):
        assert bell(client.get(path).content.decode()) == "2", path
    with CaptureQueriesContext(connection) as queries:
        client.get("/notifications/bell/")
    counts = [q["sql"] for q in queries if "notifications_notification" in q["sql"]]
    assert len(counts) == 1 and "COUNT(" in counts[0]
    assert 'hx-trigger="every 30s"' in client.get("/notifications/bell/").content.decode()
    client.post(f"/notifications/{first.pk}/read/")
    assert bell(client.get("/workloads/").content.decode()) == "1"


def test_the_bell_is_drawn_by_the_page_not_by_a_font(as_user):
    # an emoji needs a font that has it: Debian's Chromium showed an empty box
    html = as_user("researcher").get("/workloads/").content.decode()
    anchor = re.search(r'<a id="notifications-bell".*?</a>', html, re.S)
    assert anchor and "<svg" in anchor.group(0) and 'aria-hidden="true"' in anchor.group(0)
    assert not any(ord(char) > 0xFFFF or 0x2600 <= ord(char) <= 0x27BF
                   for char in anchor.group(0)), "a symbol only a font can draw"


def test_the_list_marks_unread_and_links_to_the_workload(as_user):
    client = as_user("researcher")
    tell("researcher", "old")
    notification = tell("researcher", "new")
    html = client.get("/notifications/").content.decode()
    assert html.index("new failed") < html.index("old failed")
    assert 'href="/workloads/5/"' in html
    assert f'id="notification-{notification.pk}"' in html and "unread" in html
    assert f'action="/notifications/{notification.pk}/read/"' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_mark_read_and_all_read_are_csrf_protected_posts(as_user):
    tell_to = tell("researcher", "x")
    tell("researcher", "y")
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = as_user("researcher").cookies  # the signed-in browser's session
    assert strict.post(f"/notifications/{tell_to.pk}/read/").status_code == 403  # no token
    page = strict.get("/notifications/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    answer = strict.post(f"/notifications/{tell_to.pk}/read/",
                         {"csrfmiddlewaretoken": token})
    assert answer.status_code == 302
    tell_to.refresh_from_db()
    assert tell_to.read_at is not None
    strict.post("/notifications/read-all/", {"csrfmiddlewaretoken": token})
    assert not Notification.objects.filter(read_at__isnull=True).exists()


def test_another_users_notification_is_404(as_user):
    theirs = tell("student", "z")
    assert as_user("researcher").post(f"/notifications/{theirs.pk}/read/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_the_preferences_table_saves_every_box(as_user):
    client = as_user("researcher")
    html = client.get("/notifications/preferences/").content.decode()
    assert 'value="failed.email" id="pref-failed-email" aria-label="failed: email" checked' in html
    assert 'value="started.email" id="pref-started-email" aria-label="started: email" >' in html
    # everything off but failures in the portal
    assert client.post("/notifications/preferences/", {"on": ["failed.portal"]}).status_code == 302
    user = get_user_model().objects.get(name="researcher")
    stored = dict(((p.kind, p.channel), p.enabled)
                  for p in NotificationPreference.objects.filter(user=user))
    assert stored[("failed", "portal")] is True and stored[("failed", "email")] is False
    assert len(stored) == len(Kind.values) * 3


def test_a_webhook_added_on_the_page_shows_its_secret_once(as_user):
    client = as_user("researcher")
    answer = client.post("/notifications/webhooks/", {"url": PUBLIC_URL, "kinds": ["failed"]})
    assert answer.status_code == 201
    hook = Webhook.objects.get()
    assert hook.secret in answer.content.decode()
    later = client.get("/notifications/preferences/").content.decode()
    assert hook.secret not in later and PUBLIC_URL in later
    refused = client.post("/notifications/webhooks/", {"url": "http://169.254.169.254/"})
    assert refused.status_code == 400 and "link-local" in refused.content.decode()
    assert client.post(f"/notifications/webhooks/{hook.pk}/delete/").status_code == 302
    assert not Webhook.objects.exists()


def test_a_projects_webhook_url_is_for_its_managers_only(as_user):
    lead = as_user("lead")
    vision = Tenant.objects.get(name="vision-lab")
    assert 'name="project"' in lead.get("/notifications/preferences/").content.decode()
    made = lead.post("/notifications/webhooks/", {"url": PUBLIC_URL, "project": "on"})
    assert made.status_code == 201
    hook = Webhook.objects.get(tenant=vision)
    member = as_user("researcher")
    html = member.get("/notifications/preferences/").content.decode()
    assert "its URL is for the project's managers" in html
    assert PUBLIC_URL not in html and "XXXXsecretXXXX" not in html
    assert 'name="project"' not in html
    refused = member.post("/notifications/webhooks/", {"url": PUBLIC_URL, "project": "on"})
    assert refused.status_code == 403 and Webhook.objects.count() == 1
    assert member.post(f"/notifications/webhooks/{hook.pk}/delete/").status_code == 403
    assert as_user("student", "nlp-lab").post(
        f"/notifications/webhooks/{hook.pk}/delete/").status_code == 404
    assert Webhook.objects.filter(pk=hook.pk).exists()


def test_the_test_button_queues_the_post_and_the_page_shows_its_answer(as_user, receiver,
                                                                        eager_celery):
    client = as_user("researcher")
    hook = Webhook.objects.create(user=get_user_model().objects.get(name="researcher"),
                                  url=receiver.url, secret="s" * 64)
    with TestCase.captureOnCommitCallbacks(execute=False) as queued:
        answer = client.post(f"/notifications/webhooks/{hook.pk}/test/")
    assert answer.status_code == 302 and answer["Location"].endswith(f"#webhook-{hook.pk}")
    assert receiver.received == []  # queued, not sent inside the request
    delivery = Delivery.objects.get(webhook=hook)
    page = client.get("/notifications/preferences/").content.decode()
    assert f"delivery {delivery.pk}" in page  # the message
    assert f"test #{delivery.pk}: pending" in page
    for send in queued:
        send()
    page = client.get("/notifications/preferences/").content.decode()
    assert f"test #{delivery.pk}: sent (200)" in page
    assert len(receiver.received) == 1


def test_the_pages_test_button_shares_the_users_test_rate(as_user, settings):
    settings.PORTAL_WEBHOOK_TEST_RATE = "1/minute"
    client = as_user("researcher")
    hook = Webhook.objects.create(user=get_user_model().objects.get(name="researcher"),
                                  url=PUBLIC_URL, secret="s" * 64)
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert client.post(f"/notifications/webhooks/{hook.pk}/test/").status_code == 302
        refused = client.post(f"/notifications/webhooks/{hook.pk}/test/")
    assert refused.status_code == 429 and "Too many tests" in refused.content.decode()
    assert Delivery.objects.filter(webhook=hook).count() == 1


def test_past_the_number_of_webhooks_the_page_says_so(as_user, settings):
    settings.PORTAL_WEBHOOKS_PER_USER = 1
    client = as_user("researcher")
    assert client.post("/notifications/webhooks/", {"url": PUBLIC_URL}).status_code == 201
    refused = client.post("/notifications/webhooks/", {"url": PUBLIC_URL})
    assert refused.status_code == 403
    assert "A webhook limit is reached: you have 1 of at most 1" in refused.content.decode()
    assert Webhook.objects.count() == 1


def test_the_page_shows_each_webhooks_state_and_the_button_that_applies(as_user):
    lead = as_user("lead")
    owner = get_user_model().objects.get(name="lead")
    vision = Tenant.objects.get(name="vision-lab")
    off = Webhook.objects.create(user=owner, url=PUBLIC_URL, secret="s" * 64,
                                 state=Webhook.State.DISABLED, failures=10)
    held = Webhook.objects.create(tenant=vision, url=PUBLIC_URL, secret="s" * 64,
                                  state=Webhook.State.NEEDS_CONFIRMATION)
    html = lead.get("/notifications/preferences/").content.decode()
    assert "<strong>disabled</strong>: 10 deliveries failed in a row" in html
    assert "waiting for a manager's confirmation" in html
    assert f'action="/notifications/webhooks/{off.pk}/enable/"' in html
    assert f'action="/notifications/webhooks/{held.pk}/confirm/"' in html
    assert f'action="/notifications/webhooks/{held.pk}/enable/"' not in html
    assert lead.post(f"/notifications/webhooks/{off.pk}/enable/").status_code == 302
    assert lead.post(f"/notifications/webhooks/{held.pk}/confirm/").status_code == 302
    off.refresh_from_db(), held.refresh_from_db()
    assert (off.state, off.failures, held.state, held.created_by) == ("active", 0, "active", owner)
    # a member sees the project's webhook and its state, but no button to confirm it
    member = as_user("researcher").get("/notifications/preferences/").content.decode()
    assert f'action="/notifications/webhooks/{held.pk}/confirm/"' not in member
    assert as_user("researcher").post(
        f"/notifications/webhooks/{held.pk}/confirm/").status_code == 403
