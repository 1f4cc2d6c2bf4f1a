"""The notifications API with real Keystone tokens: the caller's own notifications, the bell's
count, marking read, preferences, webhooks (the secret once, the URL only to who manages it,
SSRF refusals with a clear 400, the audit trail keeping only the host; tests queued and polled,
their rate, the number of webhooks, enabling, a project's webhook waiting for a manager)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase

from audit.models import AuditRecord
from notifications.models import Delivery, Kind, Notification, NotificationPreference, Webhook
from notifications.services import notify
from notifications.tasks import webhook_post_task
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://93.184.215.14/services/T000/B000/XXXXsecretXXXX"


@pytest.fixture
def api(api_headers):
    """`api(who, project)`: a client whose requests carry `who`'s token for `project`."""
    made: dict[tuple[str, str], Client] = {}

    def client(who: str, project: str = "vision-lab") -> Client:
        if (who, project) not in made:
            made[(who, project)] = Client(**api_headers(who, project))
            assert made[(who, project)].get("/api/v1/me/").status_code == 200
        return made[(who, project)]

    return client


def user(name: str):
    return get_user_model().objects.get(name=name)


def tell(name: str, key: str, kind: str = Kind.FINISHED, tenant=None) -> Notification:
    notify(kind=kind, users=[user(name)], tenant=tenant, title=f"{key} happened", text="text",
           key=key, workload_id=42, link="/workloads/42/")
    return Notification.objects.get(user=user(name), key=key)


def test_the_list_is_the_callers_own_newest_first_with_filters(api):
    api("researcher"), api("student", "nlp-lab")
    vision = Tenant.objects.get(name="vision-lab")
    first = tell("researcher", "finished:1", tenant=vision)
    second = tell("researcher", "failed:2", kind=Kind.FAILED)
    tell("student", "finished:3")
    body = api("researcher").get("/api/v1/notifications/").json()
    assert body["count"] == 2
    assert [row["id"] for row in body["results"]] == [second.pk, first.pk]
    row = body["results"][1]
    assert {k: row[k] for k in ("kind", "title", "workload", "project", "link", "read")} == {
        "kind": "finished", "title": "finished:1 happened", "workload": 42,
        "project": "vision-lab", "link": "/workloads/42/", "read": False}
    # the same from another project's token: a notification is the person's, not the project's
    assert api("researcher", "nlp-lab").get("/api/v1/notifications/").json()["count"] == 2
    kinds = api("researcher").get("/api/v1/notifications/", {"kind": "failed"}).json()
    assert [row["id"] for row in kinds["results"]] == [second.pk]


def test_unread_count_read_and_read_all(api):
    researcher = api("researcher")
    one, two = tell("researcher", "a"), tell("researcher", "b")
    tell("researcher", "c")
    assert researcher.get("/api/v1/notifications/unread-count/").json() == {"unread": 3}
    answer = researcher.post(f"/api/v1/notifications/{one.pk}/read/")
    assert answer.status_code == 200 and answer.json()["read"] is True
    assert researcher.get("/api/v1/notifications/unread-count/").json() == {"unread": 2}
    unread = researcher.get("/api/v1/notifications/", {"unread": "true"}).json()
    assert one.pk not in [row["id"] for row in unread["results"]]
    assert two.pk in [row["id"] for row in unread["results"]]
    assert researcher.post("/api/v1/notifications/read-all/").json() == {"marked": 2}
    assert researcher.get("/api/v1/notifications/unread-count/").json() == {"unread": 0}


def test_another_users_notification_is_404_and_stays_unread(api):
    api("student", "nlp-lab")
    theirs = tell("student", "finished:9")
    for who, project in (("researcher", "vision-lab"), ("admin", "admin")):
        answer = api(who, project).post(f"/api/v1/notifications/{theirs.pk}/read/")
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    api("researcher").post("/api/v1/notifications/read-all/")
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_preferences_are_every_kind_and_channel_with_defaults(api):
    researcher = api("researcher")
    body = researcher.get("/api/v1/notifications/preferences/").json()
    assert set(body) == set(Kind.values)
    assert body["started"] == {"portal": True, "email": False, "webhook": True}
    assert body["failed"] == {"portal": True, "email": True, "webhook": True}
    answer = researcher.put("/api/v1/notifications/preferences/",
                            {"failed": {"email": False}, "started": {"email": True}},
                            content_type="application/json")
    assert answer.status_code == 200
    assert answer.json()["failed"]["email"] is False and answer.json()["started"]["email"]


def test_unknown_kinds_or_channels_are_400_and_change_nothing(api):
    researcher = api("researcher")
    for body in ({"failed": {"email": False}, "exploded": {"email": True}},
                 {"failed": {"email": False, "pager": True}},
                 {"failed": {"email": "yes"}}, ["failed"]):
        answer = researcher.put("/api/v1/notifications/preferences/", body,
                                content_type="application/json")
        assert answer.status_code == 400, body
        assert set(answer.json()) == {"code", "category", "detail", "fields"}
    assert answer.json()["code"] == "invalid"
    assert not NotificationPreference.objects.exists()


def test_a_webhooks_secret_is_shown_once_and_its_url_only_to_its_owner(api):
    researcher = api("researcher")
    made = researcher.post("/api/v1/notifications/webhooks/",
                           {"url": PUBLIC_URL, "kinds": ["failed"]},
                           content_type="application/json")
    assert made.status_code == 201, made.json()
    hook = Webhook.objects.get()
    assert made.json()["secret"] == hook.secret and len(hook.secret) == 64
    assert made.json()["url"] == PUBLIC_URL and made.json()["kinds"] == ["failed"]
    listed = researcher.get("/api/v1/notifications/webhooks/").json()["results"]
    assert listed == [{**{k: made.json()[k] for k in made.json() if k != "secret"}}]
    assert hook.secret not in researcher.get("/api/v1/notifications/webhooks/").content.decode()
    # the audit trail keeps the host, never the path (a Slack URL's secret) or the secret
    record = AuditRecord.objects.get(action="notifications.webhook_create")
    assert record.after["host"] == "93.184.215.14"
    assert "XXXXsecretXXXX" not in str(record.after) and hook.secret not in str(record.after)
    # another user's webhook: 404, for every method
    for who, project in (("student", "nlp-lab"), ("lead", "vision-lab"), ("admin", "admin")):
        other = api(who, project)
        assert hook.pk not in [r["id"] for r in
                               other.get("/api/v1/notifications/webhooks/").json()["results"]]
        assert other.delete(f"/api/v1/notifications/webhooks/{hook.pk}/").status_code == 404
        assert other.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/").status_code == 404
    assert researcher.delete(f"/api/v1/notifications/webhooks/{hook.pk}/").status_code == 204
    assert not Webhook.objects.exists()
    deleted = AuditRecord.objects.get(action="notifications.webhook_delete")
    assert "XXXXsecretXXXX" not in str(deleted.before)


@pytest.mark.parametrize(("url", "reason"), [
    ("http://127.0.0.1:8000/hook", "loopback"),
    ("http://localhost/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://10.0.0.5/hook", "private"),
    ("https://192.168.1.10/hook", "private"),
    ("http://172.16.3.4/hook", "private"),
    ("http://100.64.0.1/hook", "private"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    # IPv6 forms that carry an IPv4 address are judged by it; IPv6 ranges that are not global
    # are refused whatever Python's is_global says
    ("http://[::127.0.0.1]/hook", "loopback"),  # IPv4-compatible
    ("http://[::ffff:0:7f00:1]/hook", "loopback"),  # IPv4-translated
    ("http://[64:ff9b::7f00:1]/hook", "loopback"),  # NAT64
    ("http://[64:ff9b:1::7f00:1]/hook", "loopback"),  # local-use NAT64
    ("http://[2002:7f00:1::]/hook", "loopback"),  # 6to4
    ("http://[fec0::1]/hook", "not on the public internet"),  # site-local
    ("http://[::a00:1]/hook", "private"),  # IPv4-compatible 10.0.0.1
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook", "loopback"),  # Teredo, 127.0.0.1
    ("ftp://93.184.215.14/hook", "http:// or https://"),
    ("file:///etc/passwd", "http:// or https://"),
    ("gopher://93.184.215.14/", "http:// or https://"),
    ("https://user:pass@93.184.215.14/hook", "user name or password"),
    ("https://token@93.184.215.14/hook", "user name or password"),
    ("https:///hook", "must name a host"),
    ("https://no-such-host.invalid/hook", "does not resolve"),
])
def test_ssrf_refusals_are_clear_400s(api, url, reason):
    answer = api("researcher").post("/api/v1/notifications/webhooks/", {"url": url},
                                    content_type="application/json")
    assert answer.status_code == 400, answer.json()
    body = answer.json()
    assert body["code"] == "invalid" and reason in body["fields"]["url"][0], body
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("url", [
    "https://[2606:4700:4700::1111]/hook",  # a global IPv6 address
    "https://[64:ff9b::5db8:d70e]/hook",  # NAT64 of 93.184.215.14
    "https://[2002:5db8:d70e::1]/hook",  # 6to4 of 93.184.215.14
])
def test_a_global_ipv6_address_is_taken(api, url):
    answer = api("researcher").post("/api/v1/notifications/webhooks/", {"url": url},
                                    content_type="application/json")
    assert answer.status_code == 201, answer.json()


def test_the_cluster_ranges_setting_is_refused_too(api, settings):
    settings.PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT = ["93.184.215.0/24"]
    answer = api("researcher").post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL},
                                    content_type="application/json")
    assert answer.status_code == 400 and "cluster" in answer.json()["fields"]["url"][0]


def test_allow_private_lets_a_site_post_to_its_own_network(api, settings):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    answer = api("researcher").post("/api/v1/notifications/webhooks/",
                                    {"url": "http://10.0.0.5/hook"},
                                    content_type="application/json")
    assert answer.status_code == 201


def test_a_projects_webhook_is_its_managers_a_member_sees_only_that_it_exists(api):
    lead, researcher, viewer = api("lead"), api("researcher"), api("viewer")
    vision = Tenant.objects.get(name="vision-lab")
    body = {"url": PUBLIC_URL, "tenant": vision.pk}
    for member in (researcher, viewer):
        refused = member.post("/api/v1/notifications/webhooks/", body,
                              content_type="application/json")
        assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert not Webhook.objects.exists()
    made = lead.post("/api/v1/notifications/webhooks/", body, content_type="application/json")
    assert made.status_code == 201 and made.json()["project"] == "vision-lab"
    hook = Webhook.objects.get()
    assert hook.tenant == vision and hook.user is None
    seen = researcher.get("/api/v1/notifications/webhooks/")
    [row] = seen.json()["results"]
    assert row["url"] is None and row["manageable"] is False and row["project"] == "vision-lab"
    assert "XXXXsecretXXXX" not in seen.content.decode()
    assert researcher.delete(f"/api/v1/notifications/webhooks/{hook.pk}/").status_code == 403
    assert researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/").status_code == 403
    # another project's people do not see it at all; the same person from another project
    assert api("student", "nlp-lab").get("/api/v1/notifications/webhooks/").json()["count"] == 0
    assert api("researcher", "nlp-lab").get(
        "/api/v1/notifications/webhooks/").json()["count"] == 0
    assert api("student", "nlp-lab").delete(
        f"/api/v1/notifications/webhooks/{hook.pk}/").status_code == 404
    nlp = Tenant.objects.get(name="nlp-lab")
    other = lead.post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL, "tenant": nlp.pk},
                      content_type="application/json")
    assert other.status_code == 400 and "tenant" in other.json()["fields"]
    assert lead.get("/api/v1/notifications/webhooks/").json()["results"][0]["url"] == PUBLIC_URL
    assert lead.delete(f"/api/v1/notifications/webhooks/{hook.pk}/").status_code == 204


def test_the_test_button_queues_a_delivery_to_poll_and_posts_nothing_in_the_request(
        api, receiver, eager_celery):
    researcher = api("researcher")
    made = researcher.post("/api/v1/notifications/webhooks/", {"url": receiver.url},
                           content_type="application/json")
    hook = Webhook.objects.get(pk=made.json()["id"])
    with TestCase.captureOnCommitCallbacks(execute=False) as queued:
        answer = researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/")
    assert answer.status_code == 202, answer.json()
    body = answer.json()
    delivery = Delivery.objects.get(webhook=hook)
    assert (body["id"], body["state"], body["done"], body["test"]) == (
        delivery.pk, "pending", False, True)
    assert body["location"] == answer["Location"] == (
        f"/api/v1/notifications/deliveries/{delivery.pk}/")
    assert receiver.received == []  # the request only queued it
    assert researcher.get(body["location"]).json()["state"] == "pending"
    for send in queued:  # the webhook worker's turn (inline here)
        send()
    polled = researcher.get(body["location"]).json()
    assert (polled["state"], polled["done"], polled["last_status"]) == ("sent", True, 200)
    [got] = receiver.received
    assert got.json["kind"] == "test" and got.headers["X-GPU-Portal-Event"] == "test"
    assert AuditRecord.objects.filter(action="notifications.webhook_test").count() == 1
    receiver.statuses = [500] * (webhook_post_task.max_retries + 1)
    with TestCase.captureOnCommitCallbacks(execute=True):
        again = researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/").json()
    polled = researcher.get(again["location"]).json()
    assert (polled["state"], polled["last_status"], polled["last_error"]) == (
        "failed", 500, "answered 500")


def test_a_delivery_is_seen_where_its_webhook_is_managed(api):
    researcher, lead = api("researcher"), api("lead")
    vision = Tenant.objects.get(name="vision-lab")
    own = Webhook.objects.create(user=user("researcher"), url=PUBLIC_URL, secret="s" * 64)
    project = Webhook.objects.create(tenant=vision, url=PUBLIC_URL, secret="s" * 64,
                                     created_by=user("lead"))
    with TestCase.captureOnCommitCallbacks(execute=False):
        mine = researcher.post(f"/api/v1/notifications/webhooks/{own.pk}/test/").json()
        ours = lead.post(f"/api/v1/notifications/webhooks/{project.pk}/test/").json()
    assert researcher.get(mine["location"]).status_code == 200
    assert api("researcher", "nlp-lab").get(mine["location"]).status_code == 200
    for who, project_name in (("student", "nlp-lab"), ("lead", "vision-lab"),
                              ("admin", "admin")):
        other = api(who, project_name).get(mine["location"])
        assert other.status_code == 404 and other.json()["code"] == "not_found"
    assert lead.get(ours["location"]).status_code == 200
    refused = researcher.get(ours["location"])  # a member: the project's webhook is not hers
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert api("student", "nlp-lab").get(ours["location"]).status_code == 404


def test_tests_past_their_rate_are_429_in_the_error_format(api, settings):
    settings.PORTAL_WEBHOOK_TEST_RATE = "2/minute"
    researcher = api("researcher")
    hook = Webhook.objects.create(user=user("researcher"), url=PUBLIC_URL, secret="s" * 64)
    with TestCase.captureOnCommitCallbacks(execute=False):
        answers = [researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/")
                   for _ in range(3)]
    assert [a.status_code for a in answers] == [202, 202, 429]
    body = answers[2].json()
    assert body["code"] == "throttled" and body["category"] == "rate_limited"
    assert set(body) == {"code", "category", "detail", "fields"}
    assert 1 <= int(answers[2]["Retry-After"]) <= 60
    assert Delivery.objects.filter(webhook=hook).count() == 2
    # the rate is the tests', not the API's: the rest of the API still answers
    assert researcher.get("/api/v1/notifications/webhooks/").status_code == 200


def test_a_user_and_a_project_have_at_most_their_number_of_webhooks(api, settings):
    settings.PORTAL_WEBHOOKS_PER_USER = 2
    settings.PORTAL_WEBHOOKS_PER_PROJECT = 3
    researcher, lead = api("researcher"), api("lead")
    vision = Tenant.objects.get(name="vision-lab")
    for _ in range(2):
        assert researcher.post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL},
                               content_type="application/json").status_code == 201
    refused = researcher.post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL},
                              content_type="application/json")
    assert refused.status_code == 403, refused.json()
    assert refused.json()["code"] == "webhook_limit"
    assert "2 of at most 2" in refused.json()["detail"]
    assert Webhook.objects.filter(user=user("researcher")).count() == 2
    # a project's count is its own: the manager's own webhooks do not take its places
    for _ in range(3):
        assert lead.post("/api/v1/notifications/webhooks/",
                         {"url": PUBLIC_URL, "tenant": vision.pk},
                         content_type="application/json").status_code == 201
    refused = lead.post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL, "tenant": vision.pk},
                        content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "webhook_limit"
    assert Webhook.objects.filter(tenant=vision).count() == 3
    assert lead.post("/api/v1/notifications/webhooks/", {"url": PUBLIC_URL},
                     content_type="application/json").status_code == 201


def test_a_disabled_webhook_is_enabled_by_its_owner_and_its_count_starts_again(api):
    researcher = api("researcher")
    hook = Webhook.objects.create(user=user("researcher"), url=PUBLIC_URL, secret="s" * 64,
                                  state=Webhook.State.DISABLED, failures=10)
    [row] = researcher.get("/api/v1/notifications/webhooks/").json()["results"]
    assert (row["state"], row["active"], row["failures"]) == ("disabled", False, 10)
    assert api("lead").post(f"/api/v1/notifications/webhooks/{hook.pk}/enable/").status_code \
        == 404
    answer = researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/enable/")
    assert answer.status_code == 200, answer.json()
    assert (answer.json()["state"], answer.json()["failures"]) == ("active", 0)
    hook.refresh_from_db()
    assert (hook.state, hook.failures) == ("active", 0)
    record = AuditRecord.objects.get(action="notifications.webhook_enable")
    assert record.before["state"] == "disabled" and record.after["state"] == "active"
    # a personal webhook has no project manager to confirm it
    refused = researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/confirm/")
    assert refused.status_code == 409 and refused.json()["code"] == "webhook_state"


def test_a_projects_webhook_stops_when_its_creator_is_no_longer_a_manager_until_one_confirms(
        api, receiver, eager_celery):
    """researcher made the project's webhook as a manager and is now a member: the project's
    news stop going there, its managers are told once, and goes on once lead confirms it."""
    lead, researcher = api("lead"), api("researcher")
    vision = Tenant.objects.get(name="vision-lab")
    hook = Webhook.objects.create(tenant=vision, url=receiver.url, secret="s" * 64,
                                  created_by=user("researcher"))

    def event(key: str) -> None:
        with TestCase.captureOnCommitCallbacks(execute=True):
            notify(kind=Kind.FAILED, users=[user("researcher")], tenant=vision, title=key,
                   text="OOMKilled", key=key)

    event("failed:1")
    hook.refresh_from_db()
    assert hook.state == "needs_confirmation"
    assert receiver.received == []
    assert Delivery.objects.get(webhook=hook).state == "skipped"
    [told] = Notification.objects.filter(kind=Kind.WEBHOOK)
    assert told.user == user("lead") and "waits for your confirmation" in told.title
    event("failed:2")  # stopped: no delivery, and the managers are not told again
    assert Delivery.objects.filter(webhook=hook).count() == 1
    assert Notification.objects.filter(kind=Kind.WEBHOOK).count() == 1
    assert lead.get("/api/v1/notifications/webhooks/").json()["results"][0]["state"] == \
        "needs_confirmation"
    # enabling is not confirming; a member may do neither
    assert lead.post(f"/api/v1/notifications/webhooks/{hook.pk}/enable/").status_code == 409
    refused = researcher.post(f"/api/v1/notifications/webhooks/{hook.pk}/confirm/")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    confirmed = lead.post(f"/api/v1/notifications/webhooks/{hook.pk}/confirm/")
    assert confirmed.status_code == 200 and confirmed.json()["state"] == "active"
    hook.refresh_from_db()
    assert hook.created_by == user("lead")
    record = AuditRecord.objects.get(action="notifications.webhook_confirm")
    assert (record.actor_name, record.before["confirmed_by"], record.after["confirmed_by"]) == (
        "lead", "researcher", "lead")
    event("failed:3")
    assert [r.json["title"] for r in receiver.received] == ["failed:3"]
