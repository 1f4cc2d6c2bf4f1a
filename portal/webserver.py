"""The web server's worker: gunicorn's threaded worker, with a thread of its own for /healthz.

gunicorn's `gthread` worker hands every request to one pool of threads (PORTAL_WEB_THREADS),
first come, first served. A burst fills the pool and queues behind it, and a liveness probe
that arrives then waits for the whole queue ahead of it: on the demo (2 workers × 4 threads),
24 webhook tests at once held /healthz 0.1–0.5 s, and as long as the burst's requests
themselves waited when they did (2.7 s behind SQLite's write lock was measured). More threads
do not help: they share the interpreter's lock and the database's writer, so the burst only
takes longer (16 threads: the 24 tests answered in 1.3–1.8 s instead of 0.2–0.6 s, /healthz
still up to 1.3 s).

So once every request thread has a request in hand (before that, nothing waits and the
worker is gthread's), this worker looks at the first bytes of each request before it hands the
connection out, without taking them off the socket (MSG_PEEK). A complete `GET /healthz` (or
HEAD) that needs nothing but the process (no body, no cookie, no upgrade) goes to a thread of
its own; every other request to the pool's queue as before. The probe then waits for no
application request, only for its turn at the interpreter. It is still answered by the
portal's own view (portal/health.py), through the same middleware: the allowed hosts, the
headers, the access log and /metrics are as for any request. Being complete and bodiless, it
never leaves that thread waiting on its client.

A probe answered beside the pool no longer notices a pool that has stopped working (every thread
stuck), which it used to by waiting with it; and gunicorn's own timeout watches only this
worker's main loop, which keeps turning while the threads hang. So the worker tells
REQUEST_THREADS (below) when a request is handed to the pool and when one is done, and /healthz
(portal/health.py) answers 503 once requests have waited with none done for the worker's
timeout (PORTAL_WEB_TIMEOUT): the kubelet restarts the pod, as it did when the probe queued.

The worker also hands a request's body over on its socket (core/body_socket.py) where it can:
plain HTTP/1.x, a declared length, nothing read of it yet. The file API then splices a large
upload straight on to the project's file server instead of reading it through the interpreter
(GunicornBodySocket, below, keeps gunicorn's reader knowing how much of the body is left).

deploy/image/gunicorn.conf.py names this worker, for the image and the demo alike. It extends
gthread's own hand-out (`enqueue_req`, the pending connections): pyproject.toml holds gunicorn
to the major version it was written for, and tests/portal/test_webserver.py runs it.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from functools import partial
from typing import Any

from gunicorn.http.body import LengthReader
from gunicorn.workers.gthread import ThreadWorker

from core.body_socket import ENVIRON_KEY

# the request lines the health thread answers; anything else goes to the pool
HEALTH_REQUEST_LINES = (b"GET /healthz ", b"GET /healthz?", b"HEAD /healthz ", b"HEAD /healthz?")
# headers that send a health request to the pool: a body to read, a session to load, a switch
# of protocol (each could hold the one health thread)
POOL_HEADERS = (b"content-length", b"transfer-encoding", b"cookie", b"upgrade")
# a probe's request is 100–300 bytes (the kubelet's, a load balancer's, through an ingress);
# one whose headers do not end within this many is not answered on the health thread
PEEK_BYTES = 2048
# "nothing to read yet" without blocking, whatever the socket's mode
PEEK_FLAGS = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)

HEALTH, POOL, NOT_YET = "health", "pool", "not yet"


def lane_of(first_bytes: bytes | None) -> str:
    """Where a request goes by its first bytes (None: nothing has arrived yet): HEALTH for a
    complete health probe that needs nothing but the process, else POOL."""
    if first_bytes is None:
        return NOT_YET
    if not first_bytes.startswith(HEALTH_REQUEST_LINES):
        return POOL
    end = first_bytes.find(b"\r\n\r\n")
    if end < 0:  # not all here yet, or too long: the pool reads it as it comes
        return POOL
    names = {line.split(b":", 1)[0].strip().lower()
             for line in first_bytes[:end].split(b"\r\n")[1:]}
    return POOL if names.intersection(POOL_HEADERS) else HEALTH


class RequestThreads:
    """Whether the web server's request threads get anything done, as the worker below tells.
    Stalled: requests handed to them, and none done for `limit_seconds` (the worker's timeout).
    Not watched (runserver, the tests' client): never stalled. The worker's main loop writes;
    /healthz only reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.limit_seconds: float | None = None
        self.outstanding = 0
        self.progress_at = clock()

    def watch(self, *, limit_seconds: float) -> None:
        self.limit_seconds = limit_seconds

    def submitted(self) -> None:
        if self.outstanding == 0:  # idle until now: the wait starts with this request
            self.progress_at = self.clock()
        self.outstanding += 1

    def finished(self) -> None:
        self.outstanding -= 1
        self.progress_at = self.clock()

    def stalled_seconds(self) -> float | None:
        """How long requests have waited with none done, once that reaches the limit."""
        if self.limit_seconds is None or self.outstanding <= 0:
            return None
        waited = self.clock() - self.progress_at
        return waited if waited >= self.limit_seconds else None


REQUEST_THREADS = RequestThreads()


class GunicornBodySocket:
    """A request's body on gunicorn's socket (core/body_socket.py's BodySocket). gunicorn's
    LengthReader counts what is left of the body: taking bytes off the socket here counts them
    off it, so that gunicorn reads and drops only what no one took before the next request on
    the connection, as it does for any body not read whole."""

    def __init__(self, sock: socket.socket, body: Any) -> None:
        self.socket = sock
        self._body = body
        self._declared: int = body.reader.length

    def take_buffered(self) -> bytes | None:
        body, reader = self._body, self._body.reader
        if body.buf.tell() or reader.length != self._declared:
            return None  # the application read some of it: the rest only through wsgi.input
        # what gunicorn read past the headers: the body's start, and perhaps the next request
        held: bytes = reader.unreader.take_buffered()
        mine, after = held[:reader.length], held[reader.length:]
        if after:
            reader.unreader.unread(after)
        reader.length -= len(mine)
        return mine

    def taken(self, count: int) -> None:
        self._body.reader.length -= count


def with_body_socket(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """The WSGI application, given GunicornBodySocket for each request whose body can be taken
    off the socket: HTTP/1.x, not TLS (the kernel would move ciphertext), a declared length."""

    def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        sock, body = environ.get("gunicorn.socket"), environ.get("wsgi.input")
        if (isinstance(sock, socket.socket) and not isinstance(sock, ssl.SSLSocket)
                and str(environ.get("SERVER_PROTOCOL", "")).startswith("HTTP/1.")
                and isinstance(getattr(body, "reader", None), LengthReader)):
            environ[ENVIRON_KEY] = GunicornBodySocket(sock, body)
        return app(environ, start_response)

    return application


class HealthLaneWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn ships no types
    """gunicorn's gthread worker; /healthz on a thread of its own (see the module's text)."""

    def init_process(self) -> None:
        self.health_pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="healthz")
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi: Callable[..., Iterable[bytes]] = with_body_socket(self.wsgi)
        self.request_threads = REQUEST_THREADS
        if self.cfg.timeout > 0:  # 0: gunicorn's "no timeout"
            REQUEST_THREADS.watch(limit_seconds=float(self.cfg.timeout))

    def _first_bytes(self, conn: Any) -> bytes | None:
        """The request's first bytes, left on the socket; b"" where they cannot be read here (TLS,
        HTTP/2, bytes the parser already took off the socket, an error): the pool's."""
        if self.cfg.is_ssl or conn.is_http2:
            return b""
        if conn.parser is not None and conn.parser.unreader.buf.getvalue():
            return b""
        try:
            first: bytes = conn.sock.recv(PEEK_BYTES, PEEK_FLAGS)
            return first
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def enqueue_req(self, conn: Any) -> None:
        """Runs on the main loop, as gthread's own does (so REQUEST_THREADS is written by one
        thread only)."""
        if self.request_threads.outstanding < self.cfg.threads:
            # a request thread is free: nothing to wait behind, so gthread's own way (and no
            # look at the socket: each call here is one more wait for the interpreter's lock
            # when the threads are busy)
            self._submit(conn, POOL)
            return
        lane = lane_of(self._first_bytes(conn))
        if lane == NOT_YET:
            # a new connection whose request has not arrived: wait for it on the poller, not
            # on a thread (as gthread does with a connection that sends nothing at first)
            conn.timeout = time.monotonic() + self.cfg.keepalive
            self.pending_conns.append(conn)
            self.poller.register(conn.sock, selectors.EVENT_READ,
                                 partial(self.on_pending_socket_readable, conn))
            return
        conn.data_ready = True
        self._submit(conn, lane)

    def _submit(self, conn: Any, lane: str) -> None:
        if lane == HEALTH:
            done = self.health_pool.submit(self.handle, conn)
        else:
            self.request_threads.submitted()
            done = self.tpool.submit(self.handle, conn)
        done.add_done_callback(
            lambda fut: self.method_queue.defer(self._finished, conn, fut, lane))

    def _finished(self, conn: Any, fut: futures.Future[None], lane: str) -> None:
        if lane == POOL:
            self.request_threads.finished()
        self.finish_request(conn, fut)

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.health_pool.shutdown(wait=False)
