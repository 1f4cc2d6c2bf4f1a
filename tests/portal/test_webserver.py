"""The web server's worker (portal/webserver.py): /healthz on a thread of its own, answered while
every request thread is held, and 503 once they have done nothing for the worker's timeout."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from portal.webserver import HEALTH, NOT_YET, POOL, RequestThreads, lane_of
from tests.support.waiting import eventually
from tests.support.web_server import EndlessAnswer, web_server

PROBE = b"GET /healthz HTTP/1.1\r\nHost: 10.1.2.3:8000\r\nUser-Agent: kube-probe/1.37\r\n" \
        b"Accept: */*\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(("first_bytes", "lane"), [
    (None, NOT_YET),  # nothing has arrived yet
    (PROBE, HEALTH),  # the kubelet's probe
    (b"HEAD /healthz HTTP/1.1\r\nHost: gpu.example.org\r\n\r\n", HEALTH),
    (b"GET /healthz?verbose=1 HTTP/1.1\r\nHost: gpu.example.org\r\n\r\n", HEALTH),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/workloads/ HTTP/1.1\r\n", HEALTH),
    # another path, one that only starts alike, another method
    (b"GET /readyz?checks=database,redis HTTP/1.1\r\nHost: x\r\n\r\n", POOL),
    (b"GET /healthzz HTTP/1.1\r\nHost: x\r\n\r\n", POOL),
    (b"GET /healthz/ HTTP/1.1\r\nHost: x\r\n\r\n", POOL),
    (b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", POOL),
    # not all here: the pool reads the rest as it comes, never the health thread
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", POOL),
    (b"GET /heal", POOL),
    (b"", POOL),  # the client closed
    # what could hold the health thread: a body to read, a session to load, another protocol
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", POOL),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\ntransfer-encoding: chunked\r\n\r\n", POOL),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nCookie: sessionid=abc\r\n\r\n", POOL),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", POOL),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", POOL),
])
def test_a_request_goes_to_the_health_thread_only_as_a_complete_bodiless_probe(first_bytes, lane):
    assert lane_of(first_bytes) == lane


def test_request_threads_stall_only_with_requests_in_hand_and_none_done():
    now = [100.0]
    threads = RequestThreads(clock=lambda: now[0])
    threads.watch(limit_seconds=60)
    now[0] = 1000.0
    assert threads.stalled_seconds() is None  # idle for long: nothing to do is not a stall
    threads.submitted()
    now[0] += 59
    assert threads.stalled_seconds() is None
    now[0] += 1
    assert threads.stalled_seconds() == 60
    threads.submitted()  # more work coming in is no progress
    assert threads.stalled_seconds() == 60
    threads.finished()  # one done: progress
    assert threads.stalled_seconds() is None
    now[0] += 61
    assert threads.stalled_seconds() == 61  # the other one is still in hand
    threads.finished()
    assert threads.stalled_seconds() is None

    unwatched = RequestThreads(clock=lambda: now[0])  # runserver, the tests' client
    unwatched.submitted()
    now[0] += 3600
    assert unwatched.stalled_seconds() is None


def answer(url: str, path: str, *, timeout: float = 10) -> tuple[int, str]:
    """One GET on a connection of its own, as the kubelet asks."""
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_healthz_answers_beside_held_request_threads_and_says_when_they_stall(tmp_path):
    """One worker with two request threads, both held by /readyz waiting on a Keystone that
    never finishes answering, a third request queued behind them: /healthz answers at once, and
    503 once none has been done for PORTAL_WEB_TIMEOUT. (gthread's own worker queued the probe
    behind the three until Keystone let go.)"""
    keystone = EndlessAnswer()
    # the timeout is the worker's boot allowance too (gunicorn's): short, but not too short
    with web_server(tmp_path, WEB_CONCURRENCY="1", PORTAL_WEB_THREADS="2",
                    PORTAL_WEB_TIMEOUT="20", KEYSTONE_URL=f"{keystone.url}/v3") as server, keystone:
        with ThreadPoolExecutor(3) as pool:
            held = [pool.submit(answer, server.url, "/readyz?checks=keystone", timeout=120)
                    for _ in range(3)]
            try:
                eventually(lambda: keystone.connections >= 2, timeout=30,
                           message="the request threads do not wait on Keystone")
                assert answer(server.url, "/healthz", timeout=5) == (200, '{"status": "ok"}')

                def stalled() -> dict | None:
                    status, body = answer(server.url, "/healthz", timeout=5)
                    return json.loads(body) if status == 503 else None

                said = eventually(stalled, timeout=60, interval=0.5,
                                  message="/healthz did not say that the request threads stalled")
            finally:
                keystone.close()  # Keystone's answers end: so do the requests, the queued one too
            assert all(future.result(timeout=60)[0] in (200, 503) for future in held)
        assert said["status"] == "stalled"
        assert "none done for" in said["detail"]
        assert answer(server.url, "/healthz") == (200, '{"status": "ok"}')
    text = server.log.read_text()
    assert '"GET /healthz HTTP/1.1" 503' in text  # logged as any request
    assert "Using worker: portal.webserver.HealthLaneWorker" in text
