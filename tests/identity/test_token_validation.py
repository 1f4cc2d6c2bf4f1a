"""API tokens: one validation in flight per token (threads and processes alike), a short
memory of refusals, and "Keystone unavailable" never remembered (a burst once saw 16 requests with
one new token sent Keystone 16 validations at once, and it gave up)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from django.core.cache import cache

from identity.client import KeystoneClient, KeystoneUnavailable, TokenInvalid
from identity.tokens import TOKEN_CACHE, _cache_key, _refused_key, validate_token
from stack.procs import REPO


class CountingClient(KeystoneClient):
    """The real client, counting the validations it sends Keystone."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.validations = 0
        self._lock = threading.Lock()

    def validate(self, subject_token, *, auth_token=None):
        with self._lock:
            self.validations += 1
        return super().validate(subject_token, auth_token=auth_token)


def all_at_once(count: int, call) -> tuple[list, list]:
    barrier = threading.Barrier(count)
    results, errors = [], []

    def run() -> None:
        barrier.wait(timeout=30)
        try:
            results.append(call())
        except Exception as exc:  # noqa: BLE001 - collected and checked by the test
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results, errors


def test_concurrent_requests_with_a_new_token_ask_keystone_once(keystone, project_token):
    token = project_token("researcher", "vision-lab")
    client = CountingClient()
    shared = TOKEN_CACHE.labels("shared")._value.get()

    results, errors = all_at_once(20, lambda: validate_token(token, client=client))

    assert not errors, errors[:3]
    assert client.validations == 1
    assert {t.user_name for t in results} == {"researcher"} and len(results) == 20
    assert {t.project_name for t in results} == {"vision-lab"}
    # those that did not ask took the asking request's answer or, later, the cache's
    assert TOKEN_CACHE.labels("shared")._value.get() > shared or cache.get(_cache_key(token))


def test_a_flight_that_landed_after_the_miss_is_not_flown_again(keystone, project_token,
                                                                 monkeypatch):
    """The race four processes hit: this request misses the cache, another request's flight
    lands (the token cached, the flight key gone), then this request takes the flight. It must
    read the cache again rather than ask Keystone a second time."""
    token = project_token("researcher", "vision-lab")
    other = CountingClient()
    landed = validate_token(token, client=other)  # the other request's flight, whole
    assert other.validations == 1
    key = _cache_key(token)
    cached = cache.get(key)
    cache.delete(key)  # as this request saw it at its miss
    real_add = cache.add

    def add_after_the_landing(name, *args, **kwargs):
        if name.startswith("ks-token-flight:"):
            cache.set(key, cached, 60)  # the other flight landed just now
        return real_add(name, *args, **kwargs)

    monkeypatch.setattr(cache, "add", add_after_the_landing)
    client = CountingClient()
    assert validate_token(token, client=client).user_id == landed.user_id
    assert client.validations == 0


VALIDATE_IN_A_PROCESS = """
import os, sys, threading, time
import django
django.setup()
from identity.tokens import validate_token
from tests.identity.test_token_validation import CountingClient, all_at_once
client = CountingClient()
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
results, errors = all_at_once(8, lambda: validate_token(sys.argv[1], client=client))
print("validations", client.validations, "ok", len(results), "errors", len(errors), flush=True)
"""


def test_processes_share_one_validation_through_redis(keystone, project_token):
    token = project_token("student", "nlp-lab")
    start = time.time() + 6  # every process is up and waiting by then
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", VALIDATE_IN_A_PROCESS, token, str(start)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    lines = [next(line for line in out.splitlines() if line.startswith("validations"))
             for out in outputs]
    counts = [int(line.split()[1]) for line in lines]
    assert all("ok 8 errors 0" in line for line in lines), outputs
    assert sum(counts) == 1, lines  # 32 requests in four processes: one validation


def test_a_refused_token_is_remembered_for_a_few_seconds(keystone, settings):
    settings.KEYSTONE_TOKEN_REFUSED_TTL = 2
    client = CountingClient()
    dead = "gAAAAAB-not-a-token-" + os.urandom(8).hex()

    for _ in range(5):
        with pytest.raises(TokenInvalid):
            validate_token(dead, client=client)
    assert client.validations == 1
    assert cache.get(_refused_key(_cache_key(dead)))

    time.sleep(2.5)  # the refusal lapsed: Keystone is asked again
    with pytest.raises(TokenInvalid):
        validate_token(dead, client=client)
    assert client.validations == 2


@pytest.fixture
def silent_keystone():
    """A port that takes connections and never answers: a Keystone too busy to reply."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v3"


def test_keystone_unavailable_is_shared_but_never_remembered(keystone, project_token, settings,
                                                             silent_keystone):
    validate_token(project_token("viewer", "vision-lab"))  # the portal's service token, as usual
    token = project_token("lead", "vision-lab")
    settings.KEYSTONE_URL = silent_keystone
    settings.KEYSTONE_TIMEOUT = 1.0  # the silent one's: the asking request gives up after 1 s
    down = CountingClient()

    started = time.monotonic()
    results, errors = all_at_once(10, lambda: validate_token(token, client=down))

    assert not results and len(errors) == 10
    assert all(isinstance(e, KeystoneUnavailable) for e in errors), errors[:3]
    assert down.validations == 1  # the asking request; the nine others took its answer
    assert time.monotonic() - started < 5  # not ten timeouts one after the other
    assert cache.get(_refused_key(_cache_key(token))) is None
    # Keystone answers again: the very next request asks it and is let in
    settings.KEYSTONE_URL = keystone.url
    settings.KEYSTONE_TIMEOUT = 5.0
    up = CountingClient()
    assert validate_token(token, client=up).user_name == "lead"
    assert up.validations == 1
