"""Every API error is JSON in the API's format ({code, detail, fields}), with DEBUG on or off,
and none carries the caller's token: deeply nested bodies (400 too_deeply_nested, not a
RecursionError)."""


import pytest
from django.test import Client

from api.parsers import MAX_JSON_DEPTH, json_depth_exceeds
from tenants.models import Tenant
from tests.workloads.api_calls import vision_lab_ready

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"code", "detail", "fields"}


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@pytest.fixture
def researcher(login, gpu_types, cluster, project_token):
    vision_lab_ready(login)
    token = project_token("researcher", "vision-lab")
    return token, Client(HTTP_X_AUTH_TOKEN=token, raise_request_exception=False)


@pytest.fixture
def admin(login, gpu_types, cluster, project_token):
    login("researcher")  # records vision-lab
    token = project_token("admin", "admin")
    return token, Client(HTTP_X_AUTH_TOKEN=token, raise_request_exception=False)


def assert_api_error(response, status: int, code: str, token: str) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json", response.content[:500]
    body = response.json()
    assert set(body) == ERROR_KEYS and body["code"] == code, body
    assert token not in response.content.decode(errors="replace")
    return body


# --- deeply nested JSON -----------------------------------------------------------------------

@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_a_deeply_nested_launch_is_400_not_a_recursion_error(researcher, settings, debug, depth):
    settings.DEBUG = debug
    token, client = researcher
    body = '{"name": "n", "env": ' + nested(depth, '{"A": "1"}') + "}"
    response = client.post("/api/v1/workloads/", body, content_type="application/json")
    detail = assert_api_error(response, 400, "too_deeply_nested", token)["detail"]
    assert f"more than {MAX_JSON_DEPTH} levels" in detail


def test_the_admin_quota_patch_refuses_deep_nesting_too(admin):
    token, client = admin
    tenant = Tenant.objects.get(name="vision-lab")
    body = '{"gpus_by_type": ' + nested(50_000, '{"a100": 1}') + "}"
    response = client.patch(f"/api/v1/tenants/{tenant.pk}/quota/", body,
                            content_type="application/json")
    assert_api_error(response, 400, "too_deeply_nested", token)
    # nesting within the limit reaches the validation as before
    ok = client.patch(f"/api/v1/tenants/{tenant.pk}/quota/", {"gpus_by_type": {"a100": 2}},
                      content_type="application/json")
    assert ok.status_code == 200, ok.json()


@pytest.mark.parametrize(("text", "depth"), [
    ("1", 0), ("[]", 1), ('{"a": [1, {"b": []}]}', 4), ('{"k": "]]]]}}}"}', 1),
    ('["\\"[[[["]', 1), ("[{" * 16 + "}]" * 16, 32), ("[{" * 16 + "[]" + "}]" * 16, 33),
    ('"[[[[[', 0), ('"\\\\"' + "[[]]", 2),
])
def test_json_depth(text, depth):
    assert not json_depth_exceeds(text, limit=depth)
    if depth:
        assert json_depth_exceeds(text, limit=depth - 1)
