"""Every API error is JSON in the API's format ({code, detail, fields}), with DEBUG on or off,
and none carries the caller's token: deeply nested bodies (400 too_deeply_nested, not a
RecursionError), oversized bodies (413 request_too_large, not Django's 400 page), unknown paths
(404), and a view that fails (500)."""

import json

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


# --- oversized bodies -------------------------------------------------------------------------

@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("content_type", ["application/json",
                                          "application/x-www-form-urlencoded"])
def test_an_oversized_body_is_413_json_without_the_token(researcher, settings, debug,
                                                         content_type):
    settings.DEBUG = debug
    token, client = researcher
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    body = (json.dumps({"name": "x" * size}) if content_type == "application/json"
            else "name=" + "x" * size)
    response = client.post("/api/v1/workloads/", body, content_type=content_type)
    detail = assert_api_error(response, 413, "request_too_large", token)["detail"]
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in detail


# --- unknown paths and failing views ----------------------------------------------------------

@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/api/v1/nope/", "/api/", "/api/v2/workloads/",
                                  "/api/v1/workloads/1/nope/", "/api/nope"])
def test_unknown_api_paths_are_404_json(researcher, settings, debug, path):
    settings.DEBUG = debug
    token, client = researcher
    assert_api_error(client.get(path), 404, "not_found", token)
    assert_api_error(client.post(path, {}, content_type="application/json"), 404, "not_found",
                     token)


def test_a_missing_trailing_slash_is_redirected(researcher):
    _, client = researcher
    response = client.get("/api/v1/workloads?state=running")
    assert response.status_code == 301 and response["Location"] == \
        "/api/v1/workloads/?state=running"
    response = client.post("/api/v1/workloads", {}, content_type="application/json")
    assert response.status_code == 308 and response["Location"] == "/api/v1/workloads/"


@pytest.mark.parametrize("debug", [False, True])
def test_a_failing_view_never_shows_the_token(researcher, settings, monkeypatch, debug):
    settings.DEBUG = debug
    token, client = researcher

    def broken(queryset, identity, action="view"):
        secret_copy = identity.scoped.id  # noqa: F841 - a local the debug page would show
        raise RuntimeError(f"something broke for {identity!r} with {token}")

    monkeypatch.setattr("workloads.querysets.WorkloadQuerySet.restrict", broken)
    response = client.get("/api/v1/workloads/?note=" + token)
    assert response.status_code == 500
    page = response.content.decode(errors="replace")
    assert token not in page
    if debug:  # Django's technical page, scrubbed
        assert "RuntimeError" in page and "********************" in page
    else:
        assert response.json() == {"code": "server_error", "fields": {},
                                   "detail": "The portal failed to answer this request; the "
                                             "error is logged."}
