"""credentials/pulls.py on what the real registry of test_registry_pull.py does not show: which
`auths` entry a docker config gives an image (Docker Hub's several names, a login kept only as
`auth`), and the answers no registry should give (a 5xx, a token service that fails, an answer
larger than any manifest, a challenge a kubelet cannot answer) — each a warning, never a
refusal, and never a message that holds the password."""

from __future__ import annotations

import base64

import httpx
import pytest

from credentials.pulls import (
    MAX_BODY,
    NOT_READABLE,
    REFUSED,
    RESOLVED,
    UNREACHABLE,
    Login,
    login_check,
    logins_for,
    resolve,
)

PASSWORD = "pw-that-must-stay-hidden"
LOGIN = Login(secret="team", username="robot", password=PASSWORD)


def auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(("key", "host", "found"), [
    ("registry.example.org", "registry.example.org", True),
    ("https://registry.example.org/v1/", "registry.example.org", True),
    ("registry.example.org:5000", "registry.example.org", False),
    ("registry.example.org.evil.com", "registry.example.org", False),
    ("https://index.docker.io/v1/", "docker.io", True),
    ("docker.io", "docker.io", True),
    ("ghcr.io", "docker.io", False),
])
def test_the_login_for_a_registry_is_the_entry_that_names_its_host(key, host, found):
    config = {"auths": {key: {"auth": auth("robot", PASSWORD)}}}
    assert logins_for(config, host, "team") == ([LOGIN] if found else [])


def test_a_login_kept_as_username_and_password_or_as_auth_alike():
    config = {"auths": {"a.example.org": {"username": "robot", "password": PASSWORD},
                        "b.example.org": {"auth": "not base64 !"}}}
    assert logins_for(config, "a.example.org", "team") == [LOGIN]
    assert logins_for(config, "b.example.org", "team") == []
    assert logins_for("not a config", "a.example.org", "team") == []
    assert PASSWORD not in repr(LOGIN)


def registry(handler) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def test_a_basic_challenge_is_answered_with_the_login():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != f"Basic {auth('robot', PASSWORD)}":
            return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="r"'})
        return httpx.Response(200, content=b"{}")

    check = resolve("registry.example.org/team/app:v1", LOGIN, timeout=5,
                    transport=registry(handler))
    assert (check.outcome, check.digest) == (
        RESOLVED, "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")


def test_no_token_granted_for_the_repository_is_not_readable():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            assert request.url.params["scope"] == "repository:team/app:pull"
            return httpx.Response(200, json={"token": "t"})
        return httpx.Response(401, headers={
            "WWW-Authenticate": 'Bearer realm="https://auth.example.org/token",service="s"'})

    check = resolve("registry.example.org/team/app:v1", LOGIN, timeout=5,
                    transport=registry(handler))
    assert (check.outcome, check.code) == (REFUSED, NOT_READABLE)


@pytest.mark.parametrize(("handler", "reason"), [
    (lambda request: httpx.Response(503), "it answered 503"),
    (lambda request: httpx.Response(401, headers={"WWW-Authenticate": "Negotiate"}),
     "it asked for a login of a kind a kubelet cannot give"),
    (lambda request: httpx.Response(500) if request.url.path == "/token" else httpx.Response(
        401, headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.org/token"'}),
     "its token service answered 500"),
    (lambda request: httpx.Response(200, content=b"x" * (MAX_BODY + 1)),
     "it answered more than a manifest holds"),
    (lambda request: httpx.Response(401, headers={"WWW-Authenticate": 'Bearer realm="::"'}),
     "its token service is not HTTPS"),
    (lambda request: httpx.Response(401, headers={
        "WWW-Authenticate": 'Bearer realm="http://auth.example.org/token"'}),
     "its token service is not HTTPS"),
    (lambda request: httpx.Response(401, headers={
        "WWW-Authenticate": 'Bearer realm="https://[::1/token"'}),
     "its token service's address is no URL"),
])
def test_what_no_registry_answers_is_a_warning(handler, reason):
    check = resolve("registry.example.org/team/app:v1", LOGIN, timeout=5,
                    transport=registry(handler))
    assert check.outcome == UNREACHABLE
    assert check.message == (f"registry.example.org could not be asked for "
                             f"registry.example.org/team/app:v1 ({reason}); the launch goes "
                             "ahead unchecked.")
    assert PASSWORD not in check.message


def test_docker_hub_is_asked_at_its_api_host_and_a_digest_reference_as_is():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, content=b"{}", headers={"Docker-Content-Digest": "sha256:ab"})

    digest = "sha256:" + "a" * 64
    check = resolve(f"pytorch/pytorch@{digest}", LOGIN, timeout=5, transport=registry(handler))
    assert seen == [f"https://registry-1.docker.io/v2/pytorch/pytorch/manifests/{digest}"]
    assert (check.outcome, check.digest) == (RESOLVED, "sha256:ab")
    resolve("localhost:5000/team/app", LOGIN, timeout=5, transport=registry(handler))
    assert seen[-1] == "http://localhost:5000/v2/team/app/manifests/latest"


def bearer_registry(token_status: int) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            assert request.url.params["account"] == "robot"
            assert "scope" not in request.url.params  # a login names no repository
            return httpx.Response(token_status, json={"token": "t"})
        return httpx.Response(401, headers={
            "WWW-Authenticate": 'Bearer realm="https://auth.example.org/token",service="s"'})

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(("transport", "outcome"), [
    (bearer_registry(200), RESOLVED),
    (bearer_registry(401), REFUSED),
    (httpx.MockTransport(lambda request: httpx.Response(200)), RESOLVED),  # asks for no login
    (httpx.MockTransport(lambda request: httpx.Response(503)), UNREACHABLE),
])
def test_a_login_is_tried_as_docker_login_tries_it(transport, outcome):
    check = login_check("registry.example.org", "robot", PASSWORD, timeout=5,
                        transport=transport)
    assert check.outcome == outcome
    assert PASSWORD not in check.message
