"""The webhook channel with the portal's real processes: Celery workers as deployed (one for the
`celery` queue, one for `notifications`) on the test database and Redis, a receiver on
loopback. A receiver that is down is retried with back-off until it comes back; one that hangs
holds the notifications worker only, never a launch."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from notifications.models import Channel, Delivery, Kind, Webhook
from notifications.services import notify, webhook_create
from stack.procs import free_port
from tests.faults.conftest import launch_body
from tests.notifications.conftest import Receiver
from tests.support.waiting import eventually
from workloads.models import Workload

# retries a second or two apart (the default waits up to 30 s, then 60 s …)
WORKER_ENV = {"PORTAL_WEBHOOK_ALLOW_PRIVATE": "1", "PORTAL_WEBHOOK_RETRY_BACKOFF_SECONDS": "1"}


def tell(user, tenant, key: str) -> None:
    notify(kind=Kind.FINISHED, users=[user], tenant=tenant, title="training finished",
           text="exit code 0", key=key, workload_id=None)


def test_a_receiver_that_is_down_is_retried_until_it_comes_back(lab, portal_processes,
                                                                settings):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    researcher = get_user_model().objects.get(name="researcher")
    port = free_port()
    webhook_create(acting_user=researcher, url=f"http://127.0.0.1:{port}/hook")
    portal_processes.notifications_worker(env=WORKER_ENV).start()
    tell(researcher, lab.tenant, "finished:down")

    def refused_twice() -> Delivery | None:
        delivery = Delivery.objects.filter(channel=Channel.WEBHOOK).first()
        return delivery if delivery is not None and delivery.attempts >= 2 else None

    delivery = eventually(refused_twice, timeout=60)
    assert delivery.state == Delivery.State.PENDING
    assert delivery.last_error.startswith("ConnectError")
    receiver = Receiver(port)  # the receiver comes back
    try:
        sent = eventually(lambda: Delivery.objects.filter(state="sent").first(), timeout=120)
        assert sent.attempts >= 3 and sent.last_status == 200
        assert len(receiver.received) == 1
        assert receiver.received[0].json["kind"] == "finished"
    finally:
        receiver.stop()


def test_a_hanging_receiver_never_delays_a_launch(lab, login, portal_processes, settings):
    """The notifications worker holds POSTs the receiver never answers (a personal webhook and
    the project's); a launch through the API answers meanwhile and the launch worker takes it
    to the cluster (the receiver is released only after that)."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    login("lead")  # the project's webhook is its manager's
    researcher = get_user_model().objects.get(name="researcher")
    lead = get_user_model().objects.get(name="lead")
    receiver = Receiver()
    receiver.hang.set()
    # a POST waits for its answer as long as the test holds it
    env = {**WORKER_ENV, "PORTAL_WEBHOOK_TIMEOUT_SECONDS": "300"}
    try:
        webhook_create(acting_user=researcher, url=receiver.url)
        webhook_create(acting_user=lead, url=receiver.url, tenant=lab.tenant)
        portal_processes.worker(concurrency=1, env=env).start()
        portal_processes.launch_worker(concurrency=2, env=env).start()
        portal_processes.notifications_worker(env=env).start()
        tell(researcher, lab.tenant, "finished:before-the-launch")
        eventually(lambda: len(receiver.received) >= 2, timeout=60,
                   message="both POSTs held by the receiver")

        response = Client().post("/api/v1/workloads/", launch_body(0),
                                 content_type="application/json", **lab.headers)
        assert response.status_code == 201, response.content[:500]
        launched = Workload.objects.get(pk=response.json()["id"])
        # the launch task ran on the launch worker while both POSTs are held
        eventually(lambda: Workload.objects.get(pk=launched.pk).state != Workload.State.SUBMITTED,
                   timeout=60, message="the launch taken up by the launch worker")
        assert receiver.answered == 0  # the held POSTs are still unanswered
        assert not receiver.release.is_set()
        receiver.release.set()
        eventually(lambda: Delivery.objects.filter(state="sent").count() >= 2, timeout=120)
    finally:
        receiver.stop()


def test_a_test_post_is_sent_by_the_notifications_worker_and_polled(lab, portal_processes,
                                                                     settings):
    """`POST …/test/` answers 202 at once; the notifications worker sends it; the delivery,
    polled, says what the receiver answered."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    researcher = get_user_model().objects.get(name="researcher")
    receiver = Receiver()
    try:
        hook = webhook_create(acting_user=researcher, url=receiver.url)
        portal_processes.notifications_worker(env=WORKER_ENV).start()
        client = Client(**lab.headers)
        answer = client.post(f"/api/v1/notifications/webhooks/{hook.pk}/test/")
        assert answer.status_code == 202, answer.content[:500]
        location = answer.json()["location"]
        polled = eventually(lambda: (lambda body: body if body["done"] else None)(
            client.get(location).json()), timeout=60, message="the test delivered")
        assert (polled["state"], polled["last_status"]) == ("sent", 200)
        assert receiver.received[0].json["kind"] == "test"
        assert Webhook.objects.get(pk=hook.pk).failures == 0
    finally:
        receiver.stop()
