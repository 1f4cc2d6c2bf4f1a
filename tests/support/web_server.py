"""The web pod's command started here (gunicorn with the image's configuration), and a server
that never finishes answering, to hold the web server's request threads with.

    with web_server(tmp_path, WEB_CONCURRENCY="1") as server:   # server.url, server.log
        ...
    with EndlessAnswer() as keystone:   # keystone.url: every request to it waits until close()
        ...
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import re
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.manifests import REPO, VENV_BIN, container_environment, deployment, render

from .waiting import eventually

GUNICORN_CONF = REPO / "deploy" / "image" / "gunicorn.conf.py"


def production_env(**extra: str) -> dict[str, str]:
    """The environment of a portal pod: production settings (no debug, TLS on)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PORTAL_", "DJANGO_", "DATABASE_", "REDIS_", "KEYSTONE_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "PORTAL_SECRET_KEY": "entrypoint-test-" + "k" * 50,
        "PORTAL_BEHIND_TLS_PROXY": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    env.update(extra)
    return env


@dataclasses.dataclass(frozen=True)
class WebServer:
    url: str
    log: Path
    metrics_dir: Path


@contextlib.contextmanager
def web_server(tmp_path: Path, **env: str) -> Iterator[WebServer]:
    """The web pod's command (the production overlay's), from the venv, with the image's
    gunicorn.conf.py, on a free loopback port (port 0: gunicorn reports the one it got), its
    PROMETHEUS_MULTIPROC_DIR under tmp_path (holding a stale file, as a restarted pod's may);
    `env` on top of the pod's environment. Yields once a worker answers."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_99999.db").write_bytes(b"stale from a previous start")
    objects = render("deploy/overlays/production")
    (container,) = deployment(objects, "web")["spec"]["template"]["spec"]["containers"]
    pod_env = container_environment(objects, container, {"status.podIP": "127.0.0.1"})
    environment = production_env(**{
        "PORTAL_WEB_BIND": "127.0.0.1:0", "WEB_CONCURRENCY": "2",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "PORTAL_ALLOWED_HOSTS": pod_env["PORTAL_ALLOWED_HOSTS"], **env})
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(VENV_BIN / container["command"][0]), *container["command"][1:],
             "--config", str(GUNICORN_CONF)],
            cwd=REPO, env=environment, stdout=out, stderr=subprocess.STDOUT)
    try:
        def listening() -> str | None:
            if proc.poll() is not None:  # no use waiting
                pytest.fail(f"gunicorn exited:\n{log.read_text()[-3000:]}")
            found = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", log.read_text())
            return found.group(1) if found else None

        url = eventually(listening, timeout=30,
                         message=lambda: f"gunicorn did not start:\n{log.read_text()[-3000:]}")
        # the workers load the portal after the master listens (10 s and more on a busy machine)
        eventually(lambda: _healthz(url) == 200, timeout=120, interval=0.2,
                   message=lambda: f"no worker answers:\n{log.read_text()[-3000:]}",
                   ignoring=(OSError, http.client.HTTPException))
        yield WebServer(url=url, log=log, metrics_dir=metrics_dir)
    finally:
        proc.terminate()  # gunicorn's graceful stop: its requests are let finish
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # one still held
            proc.kill()
            proc.wait(timeout=30)


def _healthz(url: str) -> int:
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=60)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    finally:
        connection.close()


class EndlessAnswer:
    """A loopback HTTP server that starts every answer and never finishes it: a header line
    whose bytes come one every 0.2 s, so that a client's read timeout never ends the wait.
    `close()` (or leaving the `with`) drops every connection: the clients fail then."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._held.append(conn)
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Never-Done: ")
            while not self._closed.wait(0.2):
                conn.sendall(b"z")

    def close(self) -> None:
        self._closed.set()
        self.sock.close()
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def __enter__(self) -> EndlessAnswer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
