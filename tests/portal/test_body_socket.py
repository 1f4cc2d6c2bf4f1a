"""A request's body taken off the client's socket and spliced on (core/body_socket.py), under
the portal's gunicorn worker (portal/webserver.py): the bytes arrive whole, gunicorn still
knows where the next request on the connection starts, a body the application began to read
is not handed over, and a receiver that closes early leaves the connection usable."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from stack.procs import REPO, free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


class Receiver:
    """A loopback TCP server that reads each connection to its end (or, with `close_after`, that
    many bytes, then closes it) and answers the SHA-256 of what it read."""

    def __init__(self, close_after: int | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.close_after = close_after
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            digest, seen = hashlib.sha256(), 0
            while chunk := conn.recv(1 << 16):
                digest.update(chunk)
                seen += len(chunk)
                if self.close_after is not None and seen >= self.close_after:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                    return  # a reset: the sender's next write fails
            conn.sendall(digest.hexdigest().encode() + b"\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "tests.support.body_socket_app:application",
             "--worker-class", "portal.webserver.HealthLaneWorker", "--threads", "2",
             "--workers", "1", "--bind", f"127.0.0.1:{port}",
             # its own control socket: the default (~/.gunicorn/) is shared by every gunicorn
             "--control-socket", str(log.parent / "gunicorn.ctl")],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: "Booting worker" in log.read_text() or proc.poll() is not None,
                   timeout=60, message="gunicorn did not start")
        assert proc.poll() is None, log.read_text()
        eventually(lambda: _connects(port), timeout=30, message="gunicorn does not listen")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _put(path: str, body: bytes) -> bytes:
    return (f"PUT {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body)


def _answers(conn: socket.socket, count: int) -> list[str]:
    """The bodies of `count` answers on the connection, in order."""
    return _answers_from(conn.makefile("rb"), count)


def _answers_from(reader: BinaryIO, count: int) -> list[str]:
    found = []
    for _ in range(count):
        head = b""
        while (line := reader.readline()) not in (b"\r\n", b""):
            head += line
        length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
        found.append(reader.read(length).decode().strip())
    return found


def test_a_body_is_spliced_whole_and_the_next_request_on_the_connection_follows(server):
    receiver = Receiver()
    large, small = os.urandom(24 * 2**20 + 7), os.urandom(100)
    host, port = server.split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        # the second request right behind the first's body: gunicorn reads some of it ahead
        conn.sendall(_put(f"/splice?port={receiver.port}", small)
                     + _put(f"/splice?port={receiver.port}", large))
        assert _answers(conn, 2) == [f"spliced {hashlib.sha256(small).hexdigest()}",
                                     f"spliced {hashlib.sha256(large).hexdigest()}"]


def test_a_body_the_application_began_to_read_is_not_handed_over(server):
    receiver = Receiver()
    host, port = server.split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(_put(f"/splice?port={receiver.port}&read_first=10", os.urandom(5000))
                     + _put(f"/splice?port={receiver.port}", b"after"))
        assert _answers(conn, 2) == ["not handed over",
                                     f"spliced {hashlib.sha256(b'after').hexdigest()}"]


def test_a_receiver_that_closes_early_is_answered_and_the_rest_never_read_as_a_request(server):
    closing = Receiver(close_after=2**20)
    host, port = server.split(":")
    # the rest of the body looks like a request: were it read as one, it would be answered
    # (more than the kernel's buffers between here and the receiver hold: the splice fails)
    rest = _put(f"/splice?port={closing.port}", b"x") * (64 * 2**20 // 60)
    body = os.urandom(2**20) + rest
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        def send() -> None:
            with contextlib.suppress(OSError):  # gunicorn closes the connection: see below
                conn.sendall(_put(f"/splice?port={closing.port}", body))

        sender = threading.Thread(target=send)
        sender.start()
        reader = conn.makefile("rb")
        assert _answers_from(reader, 1) == ["receiver closed"]
        # what no one took is more than gunicorn drains for another request on the connection
        # (64 KiB): it closes the connection, never reading the rest as requests
        assert reader.read() == b""
        sender.join()


def test_a_body_that_stops_coming_ends_the_splice(server):
    receiver = Receiver()
    host, port = server.split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(_put(f"/splice?port={receiver.port}&timeout=1", os.urandom(1000))[:-100])
        assert _answers(conn, 1) == ["ended early"]
