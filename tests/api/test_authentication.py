"""API authentication: Keystone tokens in X-Auth-Token, or the browser session."""

import pytest
from django.test import Client
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from identity.tokens import TOKEN_CACHE

pytestmark = pytest.mark.django_db


def unscoped_token(keystone, username: str) -> str:
    auth = v3.Password(auth_url=keystone.url, username=username, password=f"{username}-demo-pass",
                       user_domain_id="default", unscoped=True)
    return auth.get_access(ks_session.Session(auth=auth)).auth_token


def test_a_project_token_identifies_user_project_and_role(keystone, project_token):
    token = project_token("researcher", "nlp-lab")
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 200
    body = response.json()
    assert body["user_name"] == "researcher"
    assert body["project"]["name"] == "nlp-lab"
    assert body["project"]["id"] == keystone.project_ids["nlp-lab"]
    assert body["role"] == "member"
    assert body["namespace"].startswith("gpu-nlp-lab-")
    assert body["is_admin"] is False


def test_no_token_is_401_with_the_keystone_challenge(settings):
    response = Client().get("/api/v1/me/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == f'Keystone uri="{settings.KEYSTONE_URL}"'
    assert response.json()["code"] == "not_authenticated"


def test_a_bad_token_is_401(keystone):
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN="gAAAAA-not-a-token")
    assert response.status_code == 401
    assert response.json() == {"code": "authentication_failed", "category": "auth",
                               "detail": "The token is invalid, expired or revoked.", "fields": {}}


def test_an_unscoped_token_is_refused(keystone):
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=unscoped_token(keystone, "researcher"))
    assert response.status_code == 401
    assert "scoped to a project" in response.json()["detail"]


def test_a_revoked_token_stops_working_once_the_cache_entry_lapses(keystone, settings, project_token):
    from django.core.cache import cache

    token = project_token("student", "nlp-lab")
    client = Client()
    hits = TOKEN_CACHE.labels("hit")._value.get()
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    assert TOKEN_CACHE.labels("hit")._value.get() == hits + 1  # the second came from Redis
    keystone.admin().tokens.revoke_token(token)
    # within the TTL the cached validation still answers (the documented revocation delay)
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    cache.clear()  # the TTL has passed
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 401


def test_the_cache_ttl_is_bounded_by_the_setting(keystone, settings, project_token):
    from django.core.cache import cache

    from identity.tokens import _cache_key

    settings.KEYSTONE_TOKEN_CACHE_TTL = 7
    token = project_token("viewer", "vision-lab")
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    ttl = cache.ttl(_cache_key(token)) if hasattr(cache, "ttl") else None
    raw = cache._cache.get_client(_cache_key(token)).ttl(cache.make_and_validate_key(_cache_key(token)))
    assert 0 < raw <= 7, (ttl, raw)


def test_the_admin_project_token_makes_a_portal_admin(keystone, project_token):
    token = project_token("admin", "admin")
    body = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).json()
    assert body["is_admin"] is True
    assert body["role"] == "admin"


def test_keystone_unreachable_is_503_not_500(keystone, settings):
    settings.KEYSTONE_URL = "http://127.0.0.1:9/v3"
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN="some-token-not-in-cache")
    assert response.status_code == 503
    assert response.json()["code"] == "identity_unavailable"


def test_the_browser_session_works_for_the_api(keystone):
    client = Client()
    client.post("/login/", {"username": "lead", "password": "lead-demo-pass", "domain": "Default"})
    body = client.get("/api/v1/me/").json()
    assert body["user_name"] == "lead" and body["role"] == "manager"


def test_an_expired_session_gets_401_from_the_api(keystone):
    import datetime as dt

    import time_machine

    client = Client()
    client.post("/login/", {"username": "lead", "password": "lead-demo-pass", "domain": "Default"})
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(hours=2), tick=False):
        assert client.get("/api/v1/me/").status_code == 401
