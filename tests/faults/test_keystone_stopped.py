"""Keystone stopped: the login page says so (503); a signed-in session and an API token the
portal has already validated keep working, within their limits; a token never seen before is a
clear 503, not a 401 (it may well be valid) nor a 500; once Keystone is back, everything works
again without restarting anything."""

import dataclasses
import datetime as dt

import pytest
from django.core.cache import cache
from django.test import Client

from identity import identity as identity_store
from identity.tokens import _cache_key
from identity.views import UNREACHABLE

API = "/api/v1/workloads/"


def expire_session_token(client: Client) -> None:
    """Age the session's Keystone tokens past their expiry, as time would."""
    session = client.session
    identity = identity_store.load(session)
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    identity.unscoped = dataclasses.replace(identity.unscoped, expires_at=past)
    identity.scoped = dataclasses.replace(identity.scoped, expires_at=past)
    identity_store.store(session, identity)
    session.save()


def login_post(client: Client, username: str):
    return client.post("/login/", {"username": username, "password": f"{username}-demo-pass",
                                   "domain": "Default"})


@pytest.mark.django_db
def test_keystone_down_login_says_so_sessions_and_cached_tokens_carry_on(
        keystone_restartable, login, project_token, settings, cluster):
    session = login("researcher")
    assert session.get("/").status_code == 200
    expiring = login("lead")
    seen = project_token("researcher", "vision-lab")
    assert Client().get(API, HTTP_X_AUTH_TOKEN=seen).status_code == 200  # validated, cached
    unseen = project_token("student", "nlp-lab")  # valid, never shown to the portal

    keystone_restartable.stop()
    try:
        # the session's next check with Keystone is due on every request from now on
        settings.KEYSTONE_TOKEN_CACHE_TTL = 0
        page = session.get("/")
        assert page.status_code == 200  # trusted until its token's own expiry
        assert b"researcher" in page.content
        # … and no longer: a session whose token expired ends, Keystone or not
        expire_session_token(expiring)
        ended = expiring.get("/", follow=True)
        assert ended.redirect_chain[-1][0].startswith("/login/")
        assert "Your Keystone session has expired" in ended.content.decode()

        assert Client().get(API, HTTP_X_AUTH_TOKEN=seen).status_code == 200
        refused = Client().get(API, HTTP_X_AUTH_TOKEN=unseen)
        assert refused.status_code == 503, refused.content
        assert refused.json()["code"] == "identity_unavailable"
        # the cached token's limit is its cache entry: once that lapses it is asked about again
        cache.delete(_cache_key(seen))
        lapsed = Client().get(API, HTTP_X_AUTH_TOKEN=seen)
        assert lapsed.status_code == 503 and lapsed.json()["code"] == "identity_unavailable"

        anonymous = Client()
        response = login_post(anonymous, "lead")
        assert response.status_code == 503
        assert UNREACHABLE in response.content.decode()
        assert anonymous.get("/").status_code == 302  # not signed in: off to the login page

        ready = Client().get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["keystone"].startswith("failed")
    finally:
        keystone_restartable.start()

    settings.KEYSTONE_TOKEN_CACHE_TTL = 60
    assert login_post(Client(), "lead").status_code == 302
    assert Client().get(API, HTTP_X_AUTH_TOKEN=unseen).status_code == 200
    assert Client().get(API, HTTP_X_AUTH_TOKEN=seen).status_code == 200
    assert session.get("/").status_code == 200
