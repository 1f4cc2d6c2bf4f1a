"""A real webhook receiver on loopback (http.server in a thread), the people of the demo
Keystone as users, and the settings the notifications tests share."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# the fault tests' real portal processes (a Celery worker as deployed) and their provisioned lab
from tests.faults.conftest import fault_cluster, lab, portal_processes  # noqa: F401


@dataclasses.dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """Answers each POST with the next of `statuses` (then 200); `hang` set: accepts the request
    and answers only once `release` is set."""

    def __init__(self, port: int = 0) -> None:
        self.received: list[Received] = []
        self.answered = 0
        self.statuses: list[int] = []
        self.hang = threading.Event()
        self.release = threading.Event()
        self.hanging = threading.Event()  # a request is held
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                if receiver.hang.is_set():
                    receiver.hanging.set()
                    receiver.release.wait(60)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                receiver.answered += 1

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-path-T0KEN"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    """A receiver on loopback, with loopback webhooks allowed (PORTAL_WEBHOOK_ALLOW_PRIVATE)."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    found = Receiver()
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def people(db):
    """Two users as the portal keeps them (keystone ids, e-mail addresses)."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    return {name: users.create(username=name, keystone_user_id=f"ks-{name}",
                               email=f"{name}@example.org")
            for name in ("ada", "bob")}
