"""The webhook channel with the portal's real processes: a Celery worker (as deployed) on the
test database and Redis, a receiver on loopback. A receiver that is down is retried with
back-off until it comes back; one that hangs never holds up a launch."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from notifications.models import Channel, Delivery, Kind
from notifications.services import notify, webhook_create
from stack.procs import free_port
from tests.faults.conftest import launch_body
from tests.notifications.conftest import Receiver
from tests.support.waiting import eventually

WORKER_ENV = {"PORTAL_WEBHOOK_ALLOW_PRIVATE": "1"}


def tell(user, tenant, key: str) -> None:
    notify(kind=Kind.FINISHED, users=[user], tenant=tenant, title="training finished",
           text="exit code 0", key=key, workload_id=None)


def test_a_receiver_that_is_down_is_retried_until_it_comes_back(lab, portal_processes,
                                                                settings):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    researcher = get_user_model().objects.get(username="researcher")
    port = free_port()
    webhook_create(acting_user=researcher, url=f"http://127.0.0.1:{port}/hook")
    portal_processes.worker(env=WORKER_ENV).start()
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


def test_a_hanging_receiver_never_delays_a_launch(lab, portal_processes, settings):
    """The worker holds a POST the receiver never answers; a launch through the API answers
    meanwhile (the receiver is released only after the launch's answer)."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    researcher = get_user_model().objects.get(username="researcher")
    receiver = Receiver()
    receiver.hang.set()
    try:
        webhook_create(acting_user=researcher, url=receiver.url)
        webhook_create(acting_user=researcher, url=receiver.url, tenant=lab.tenant)
        portal_processes.worker(env=WORKER_ENV).start()
        tell(researcher, lab.tenant, "finished:before-the-launch")
        eventually(receiver.hanging.is_set, timeout=60)

        response = Client().post("/api/v1/workloads/", launch_body(0),
                                 content_type="application/json", **lab.headers)
        assert response.status_code == 201, response.content[:500]
        assert receiver.answered == 0  # the held POST is still unanswered
        assert not receiver.release.is_set()
        receiver.release.set()
        eventually(lambda: Delivery.objects.filter(state="sent").count() >= 2, timeout=120)
    finally:
        receiver.stop()
