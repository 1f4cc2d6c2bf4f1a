"""Fuzzing the API from its own OpenAPI schema (schemathesis): no generated input, valid or
not, may produce a server error; every 4xx answer is in the API's error format. Every operation
that takes a body also gets one nested 100,000 levels deep and ones past
DATA_UPLOAD_MAX_MEMORY_SIZE (JSON and a form): 400 `too_deeply_nested` / 413
`request_too_large` or the operation's own answer, never a 500 or the caller's token.

Bounded: EXAMPLES_PER_OPERATION cases per operation (≈ 100 in all), no deadline, run
in-process through the WSGI application with a real Keystone token, inside the test's
transaction (whatever a case creates is rolled back).
"""

from __future__ import annotations

import contextlib
import itertools
import os

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import DataGenerationMethod, GenerationConfig

from tenants.models import Tenant
from tenants.services import quota_update

pytestmark = pytest.mark.django_db

# ≈ 100 cases in all; FUZZ_EXAMPLES_PER_OPERATION=200 for a longer hunt
EXAMPLES_PER_OPERATION = int(os.environ.get("FUZZ_EXAMPLES_PER_OPERATION", "6"))


@pytest.fixture
def api_schema():
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return schemathesis.from_dict(
        response.json(), app=WSGIHandler(), data_generation_methods=DataGenerationMethod.all(),
        # the real token goes in every case; generated credentials would only test the parser
        generation_config=GenerationConfig(with_security_parameters=False))


@pytest.fixture
def real_ids(project_token, gpu_types, cluster):
    """A tenant and a workload that exist, so that some cases address real objects."""
    token = project_token("researcher", "vision-lab")
    assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4}})
    from django.test import TestCase

    with TestCase.captureOnCommitCallbacks(execute=False):
        launched = Client().post("/api/v1/workloads/", {"name": "fuzz target",
                                                        "template": "jupyter",
                                                        "gpu_type": "a100", "gpu_count": 1},
                                 content_type="application/json", HTTP_X_AUTH_TOKEN=token)
    assert launched.status_code == 201, launched.json()
    return token, {"tenant": tenant.pk, "workload": launched.json()["id"]}


def test_no_generated_request_gets_a_server_error(api_schema, real_ids):
    token, ids = real_ids
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10
    failures: list[str] = []
    counter = itertools.count()

    def make_check(operation, real_id: int):
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def check(case):
            if case.path_parameters and "id" in case.path_parameters and next(counter) % 2:
                case.path_parameters["id"] = real_id  # every other case hits a real object
            if case.headers:
                # HTTP servers refuse NUL and line breaks in header values (gunicorn answers
                # 400 before Django sees the request); WSGI in-process would let them through
                case.headers = {k: v.replace("\x00", "").replace("\r", "").replace("\n", "")
                                for k, v in case.headers.items()}
            savepoint = transaction.savepoint()  # each case starts from the same state
            try:
                with _no_on_commit():
                    response = case.call(headers=_credentials(operation, real_id, token))
            finally:
                transaction.savepoint_rollback(savepoint)
            body = "" if case.body is schemathesis.types.NotSet else f" body={case.body!r:.300}"
            label = (f"{case.method} {case.formatted_path} {case.query or ''}"
                     f"{case.headers or ''}{body} -> ")
            if response.status_code >= 500:
                failures.append(label + f"{response.status_code} {response.get_data()[:300]!r}")
            elif response.status_code >= 400 and response.mimetype == "application/json":
                body = response.get_json()
                if not (isinstance(body, dict) and {"code", "detail", "fields"} <= set(body)):
                    failures.append(label + f"{response.status_code} not the error format: "
                                            f"{body!r:.300}")
        return check

    with _test_client_rules():
        for operation in operations:
            real_id = ids["tenant"] if "/tenants/" in operation.path else ids["workload"]
            make_check(operation, real_id)()
            failures += _hostile_bodies(operation, real_id, token)
    assert not failures, "\n".join(failures)


# beyond what the schema generates: a body nested past any parser's recursion, and bodies
# larger than DATA_UPLOAD_MAX_MEMORY_SIZE (JSON and a form)
DEEP = ("[" * 100_000 + "]" * 100_000).encode()


def _hostile_bodies(operation, real_id: int, token: str) -> list[str]:
    from django.conf import settings

    if operation.method.upper() not in ("POST", "PUT", "PATCH"):
        return []
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    bodies = [("deep", "application/json", DEEP),
              ("oversized", "application/json", b'{"name": "' + b"x" * size + b'"}'),
              ("oversized form", "application/x-www-form-urlencoded", b"name=" + b"x" * size)]
    failures = []
    for label, content_type, body in bodies:
        case = operation.make_case(
            path_parameters={"id": real_id} if "{id}" in operation.path else None)
        savepoint = transaction.savepoint()
        try:
            with _no_on_commit():
                response = case.call(headers={**_credentials(operation, real_id, token),
                                              "Content-Type": content_type}, data=body)
        finally:
            transaction.savepoint_rollback(savepoint)
        where = f"{operation.method.upper()} {operation.path} {label} body -> "
        if response.status_code >= 500:
            failures.append(where + f"{response.status_code} {response.get_data()[:300]!r}")
        elif token.encode() in response.get_data():
            failures.append(where + "the answer carries the caller's token")
        elif response.status_code >= 400:
            error = response.get_json(silent=True)
            if not (isinstance(error, dict) and {"code", "detail", "fields"} <= set(error)):
                failures.append(where + f"{response.status_code} not the error format: "
                                        f"{response.get_data()[:300]!r}")
            elif error["code"] not in ("too_deeply_nested", "request_too_large",
                                       "permission_denied", "method_not_allowed", "not_found"):
                failures.append(where + f"{response.status_code} {error['code']}")
    return failures


def _credentials(operation, real_id: int, token: str) -> dict[str, str]:
    """The caller's token; for the SSH servers' reports, which no Keystone token reaches (a
    401 before the body is read), the report token of the workload's pod."""
    if operation.path != "/api/v1/ssh-sessions/":
        return {"X-Auth-Token": token}
    from access.ssh import report_token_for
    from workloads.models import Workload

    client_id = Workload.objects.get(pk=real_id).access.client_id
    return {"X-Auth-Token": token, "Authorization": f"Bearer {report_token_for(client_id)}"}


@contextlib.contextmanager
def _test_client_rules():
    """What Django's test client does around a request: keep the database connection (the
    test's transaction must outlive each request) instead of closing it when one ends."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


class _no_on_commit:
    """Tasks a case would queue on commit are captured and dropped (nothing is committed)."""

    def __enter__(self):
        from django.test import TestCase

        self._ctx = TestCase.captureOnCommitCallbacks(execute=False)
        self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


# what the fuzzer found, kept as plain regression tests
@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/api/v1/workloads/", {"name": "n", "template": "jupyter", "gpu_type": "a1\x0000",
                                    "gpu_count": 1}),
    ("get", "/api/v1/workloads/?owner=%00", None),
    ("get", "/api/v1/tenants/?q=a%00b", None),
    ("get", "/api/v1/tenants/99999999999999999999999/", None),
    ("get", "/api/v1/workloads/99999999999999999999999/events/", None),
])
def test_values_the_database_refuses_are_client_errors(real_ids, method, path, body):
    token, _ = real_ids
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with transaction.atomic():  # a refused statement must not poison the test's transaction
        response = (client.post(path, body, content_type="application/json")
                    if method == "post" else client.get(path))
        transaction.set_rollback(True)
    assert 400 <= response.status_code < 500, response.content[:300]
    assert set(response.json()) == {"code", "detail", "fields"}
