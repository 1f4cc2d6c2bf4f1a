"""Every API error is JSON in the API's format ({code, category, detail, fields}), with DEBUG on
or off, and none carries the caller's token: deeply nested bodies (400 too_deeply_nested, not a
RecursionError), oversized bodies (413 request_too_large, not Django's 400 page), unknown paths
(404), and a view that fails (500). A large bad body is answered with a small error (an excerpt
of what was sent), and every error names its category."""

import datetime as dt
import json

import pytest
from django.db import transaction
from django.test import Client, TestCase
from django.utils import timezone

from api.parsers import MAX_JSON_DEPTH, json_depth_exceeds
from tenants.models import Tenant
from tests.workloads.api_calls import vision_lab_ready

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"code", "category", "detail", "fields"}


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
        assert response.json() == {"code": "server_error", "category": "internal", "fields": {},
                                   "detail": "The portal failed to answer this request; the "
                                             "error is logged."}


# --- what an error echoes ------------------------------------------------------------------------

BIG = 200_000  # characters of the bad input


def _big_bad_bodies(tenant_pk: int) -> list[tuple[str, str, object]]:
    many_keys = {f"gpu-{i:06d}-{'x' * 20}": 1 for i in range(BIG // 30)}
    return [
        ("put", f"/api/v1/tenants/{tenant_pk}/quota/", {"gpus_by_type": {"x" * BIG: 1}}),
        ("patch", f"/api/v1/tenants/{tenant_pk}/quota/", {"gpus_by_type": many_keys}),
        ("put", f"/api/v1/tenants/{tenant_pk}/budget/",
         {"period": "month", "gpu_hours": 1, "warn_at": ["x" * 10] * (BIG // 14),
          "weights": many_keys}),
        ("put", f"/api/v1/tenants/{tenant_pk}/budget/",
         {"period": "x" * BIG, "gpu_hours": "y" * BIG}),
        ("post", "/api/v1/reservations/", {**{f"f{i:07d}": 1 for i in range(BIG // 14)},
                                           "gpu_type": "x" * BIG}),
        ("post", "/api/v1/maintenance-windows/",
         {"nodes": ["N" * 300] * (BIG // 300), "node_selector": "x" * BIG, "reason": "r"}),
        ("post", "/api/v1/workloads/", {"name": "n", "template": "x" * BIG, "gpu_type": "a100",
                                        "gpu_count": 1, "env": {"x" * BIG: "1"}}),
        ("put", "/api/v1/notifications/preferences/", {"x" * BIG: {"y" * 10: True}}),
    ]


def test_a_large_bad_body_is_answered_with_a_small_error(admin, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * BIG
    token, client = admin
    tenant = Tenant.objects.get(name="vision-lab")
    for method, path, body in _big_bad_bodies(tenant.pk):
        sent = json.dumps(body)
        assert len(sent) >= BIG
        with transaction.atomic():
            response = getattr(client, method)(path, sent, content_type="application/json")
            transaction.set_rollback(True)
        assert 400 <= response.status_code < 500, (path, response.content[:300])
        error = response.json()
        assert set(error) == ERROR_KEYS and error["category"] == "invalid", (path, error)
        assert len(response.content) <= 12_000, (path, len(response.content))


# --- categories ----------------------------------------------------------------------------------

def test_every_error_has_its_category(researcher, admin, settings):
    token, client = researcher
    _, as_admin = admin
    tenant = Tenant.objects.get(name="vision-lab")
    post = {"content_type": "application/json"}
    soon = timezone.now().replace(microsecond=0)
    seen = {
        "invalid": client.post("/api/v1/workloads/", {"name": ""}, **post),
        "auth": Client().get("/api/v1/workloads/", HTTP_X_AUTH_TOKEN="gAAAA-no-token"),
        "forbidden": client.put(f"/api/v1/tenants/{tenant.pk}/quota/", {}, **post),
        "not_found": client.get("/api/v1/workloads/999999/"),
        "conflict": as_admin.post("/api/v1/reservations/", {  # more than the cluster has
            "tenant": tenant.pk, "gpu_type": "a100", "count": 1000,
            "start": (soon + dt.timedelta(days=2)).isoformat(),
            "end": (soon + dt.timedelta(days=2, hours=1)).isoformat()}, **post),
    }
    with TestCase.captureOnCommitCallbacks(execute=False):
        for _ in range(2):
            seen["admission"] = client.post("/api/v1/workloads/", {
                "name": "n", "template": "jupyter", "gpu_type": "a100", "gpu_count": 4}, **post)
    settings.PORTAL_API_THROTTLE_RATE = "1/minute"
    client.get("/api/v1/me/")
    seen["rate_limited"] = client.get("/api/v1/me/")
    for category, response in seen.items():
        body = response.json()
        assert body["category"] == category, (category, response.status_code, body)
    assert seen["admission"].status_code == 403
    assert seen["admission"].json()["code"] == "quota_exceeded"


def test_the_schema_documents_the_error_shape_and_its_categories():
    from api.errors import CATEGORIES

    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "category", "detail", "fields"]
    assert error["properties"]["category"]["enum"] == CATEGORIES
    launch = schema["paths"]["/api/v1/workloads/"]["post"]["responses"]
    assert launch["403"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"}
