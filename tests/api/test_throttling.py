"""Per-user rate limiting: past the rate, 429 with Retry-After in the API's error format."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_past_the_rate_a_user_gets_429_with_retry_after(keystone, project_token, settings):
    settings.PORTAL_API_THROTTLE_RATE = "3/minute"
    token = project_token("researcher", "vision-lab")
    client = Client()
    for _ in range(3):
        assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    response = client.get("/api/v1/templates/", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 429
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 60
    body = response.json()
    assert body["code"] == "throttled" and body["fields"] == {}
    assert "available in" in body["detail"]


def test_the_budget_is_per_user_not_per_token_or_client(keystone, project_token, settings):
    settings.PORTAL_API_THROTTLE_RATE = "2/minute"
    researcher_a = project_token("researcher", "vision-lab")
    researcher_b = project_token("researcher", "nlp-lab")  # another token, the same user
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=researcher_a).status_code == 200
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=researcher_b).status_code == 200
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=researcher_a).status_code == 429
    # another user has a budget of their own
    student = project_token("student", "nlp-lab")
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=student).status_code == 200


def test_the_browser_session_shares_the_limit(login, settings):
    settings.PORTAL_API_THROTTLE_RATE = "1/minute"
    client = login("lead")
    assert client.get("/api/v1/me/").status_code == 200
    assert client.get("/api/v1/me/").status_code == 429


def test_an_empty_rate_turns_throttling_off(keystone, project_token, settings):
    settings.PORTAL_API_THROTTLE_RATE = ""
    token = project_token("viewer", "vision-lab")
    for _ in range(5):
        assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200


def test_redis_down_serves_unthrottled(keystone, project_token, settings, monkeypatch):
    from django.core.cache.backends.redis import RedisCache

    from api.throttling import PortalUserRateThrottle

    settings.PORTAL_API_THROTTLE_RATE = "1/minute"
    token = project_token("viewer", "vision-lab")
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    dead = RedisCache("redis://127.0.0.1:9/0", {"OPTIONS": {"socket_connect_timeout": 0.5}})
    monkeypatch.setattr(PortalUserRateThrottle, "cache", dead)
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
