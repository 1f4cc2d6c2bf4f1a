"""The API against its own OpenAPI schema, with each role: schemathesis generates requests for
every operation of /api/schema/ (valid and invalid ones), sent as an admin, a manager, a member
and a reader. No answer may be a server error, and every answer must be what the schema says:
a documented status, a documented content type, a body of the documented shape (the errors'
{code, category, detail, fields} included).

Destructive operations (DELETE, stop, read, test) run too, against objects this test made for
the purpose (a workload, a reservation, a maintenance window, each user's notification and
webhook): every other case addresses one of them by id. Each case runs inside a savepoint that
is rolled back, and the tasks it would queue on commit are dropped, so every case starts from
the same state and nothing reaches the cluster.

Beyond what the schema generates, every operation that takes a body also gets one nested
100,000 levels deep and ones past DATA_UPLOAD_MAX_MEMORY_SIZE (JSON and a form): 400
`too_deeply_nested` / 413 `request_too_large` or the operation's own answer, never a 500 or the
caller's token. What the fuzzing found is kept below as plain regression tests.

Bounded and reproducible: EXAMPLES_PER_OPERATION cases per operation, derandomized (the same
cases every run), each sent as every role, in-process through the WSGI application with real
Keystone tokens.
FUZZ_EXAMPLES_PER_OPERATION=200 makes a longer hunt.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.db import transaction
from django.test import Client, TestCase
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import DataGenerationMethod, GenerationConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from clusters.models import Cluster
from credentials.services import secret_create
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = int(os.environ.get("FUZZ_EXAMPLES_PER_OPERATION", "8"))

# role → (Keystone user, project): the test stack's identities
ROLES = {"admin": ("admin", "admin"), "manager": ("lead", "vision-lab"),
         "member": ("researcher", "vision-lab"), "reader": ("viewer", "vision-lab")}

# names the schema types as free text that the portal looks up: a generated one is never
# found, and what lies behind the lookup would go untested
REAL_NAMES = {"gpu_type": "a100", "template": "jupyter", "cluster": "main"}
# the cluster a case that names one in its path addresses: registered for the purpose,
# unreachable as its probe saw it (no read waits for it)
FUZZ_CLUSTER = "fuzz"

CHECKS = (status_code_conformance, content_type_conformance, response_schema_conformance)


@pytest.fixture
def api_schema():
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return schemathesis.from_dict(
        response.json(), app=WSGIHandler(), data_generation_methods=DataGenerationMethod.all(),
        # the real token goes in every case; generated credentials would only test the parser
        generation_config=GenerationConfig(with_security_parameters=False))


def _me(token: str) -> dict[str, Any]:
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 200, response.content[:300]
    return response.json()


@pytest.fixture
def owned(project_token, gpu_types, cluster, settings):
    """Each role's token, and the objects the cases address: ids by kind, per role where the
    object is a user's own."""
    # the webhook test's own rate (tested in tests/notifications) would answer the sweep's
    # later cases 429 whatever they hold, and a replayed case otherwise
    settings.PORTAL_WEBHOOK_TEST_RATE = None
    from calendars.services import reservation_create, window_create
    from calendars.validation import reservation_clean, window_clean
    from notifications.models import Kind, Webhook
    from notifications.services import notify

    settings.PORTAL_API_THROTTLE_RATE = None  # thousands of requests a minute, by design
    tokens = {role: project_token(*who) for role, who in ROLES.items()}
    users = {role: get_user_model().objects.get(keystone_user_id=_me(token)["user_id"])
             for role, token in tokens.items()}
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4}})
    tenant_reconcile(tenant_id=tenant.pk)  # its namespace: a secret's value is written there
    secret = secret_create(tenant=tenant, acting_user=users["manager"], name="fuzz-target",
                           kind="env", scope="project", data={"FUZZ": "value"})
    with TestCase.captureOnCommitCallbacks(execute=False):
        launched = Client().post("/api/v1/workloads/", {"name": "fuzz target",
                                                        "template": "jupyter",
                                                        "gpu_type": "a100", "gpu_count": 1},
                                 content_type="application/json",
                                 HTTP_X_AUTH_TOKEN=tokens["member"])
        assert launched.status_code == 201, launched.json()
        start = timezone.now().replace(microsecond=0) + dt.timedelta(days=2)
        reservation = reservation_create(
            tenant=tenant, acting_user=None, within_allowance=False,
            fields=reservation_clean({"gpu_type": "v100", "count": 1,
                                      "start": start.isoformat(),
                                      "end": (start + dt.timedelta(hours=2)).isoformat()}))
        window = window_create(acting_user=None, fields=window_clean(
            {"gpu_type": "t4", "reason": "fuzz", "start": start.isoformat(),
             "end": (start + dt.timedelta(hours=1)).isoformat()}))
        notify(kind=Kind.FINISHED, users=list(users.values()), tenant=tenant, title="fuzz",
               text="fuzz", key="fuzz")
    notifications = {role: user.notifications.get(key="fuzz").pk for role, user in users.items()}
    # an address that refuses at once: the test delivery answers without waiting on a network
    webhooks = {role: Webhook.objects.create(user=user, url="http://127.0.0.1:9/hook",
                                             secret="0" * 64, created_by=user).pk
                for role, user in users.items()}
    Cluster.objects.create(name=FUZZ_CLUSTER, kubeconfig_path="/nonexistent/fuzz.kubeconfig",
                           state=Cluster.State.UNREACHABLE, reason="fuzz")
    ids = {"tenant": tenant.pk, "workload": launched.json()["id"],
           "reservation": reservation.pk, "window": window.pk, "secret": secret.pk}
    return tokens, ids, notifications, webhooks


def _object_id(path: str, role: str, ids, notifications, webhooks) -> int:
    if path.startswith("/api/v1/notifications/webhooks/"):
        return webhooks[role]
    if path.startswith("/api/v1/notifications/"):
        return notifications[role]
    for prefix, kind in (("/api/v1/tenants/", "tenant"), ("/api/v1/reservations/", "reservation"),
                         ("/api/v1/maintenance-windows/", "window"),
                         ("/api/v1/secrets/", "secret")):
        if path.startswith(prefix):
            return ids[kind]
    return ids["workload"]


def test_every_operation_with_every_role_answers_as_its_schema_says(api_schema, owned):
    tokens, ids, notifications, webhooks = owned
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 40
    failures: dict[str, str] = {}  # one line per operation, role and kind of failure
    counter = itertools.count()

    def sweep(operation) -> None:
        """EXAMPLES_PER_OPERATION cases of one operation, each sent as every role. Derandomized,
        the cases drawn for an operation are the same whoever sends them: they are drawn once
        and sent four times (drawing is most of the sweep's time, the requests the least)."""
        real_ids = {role: _object_id(operation.path, role, ids, notifications, webhooks)
                    for role in ROLES}
        headers = {role: _credentials(operation, real_ids[role], tokens[role]) for role in ROLES}

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  derandomize=True, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def check(case):
            real = next(counter) % 2  # every other case hits a real object, of a real type
            for role in ROLES:
                send(case.partial_deepcopy(), role, real_ids[role] if real else None,
                     headers[role])

        check()

    def send(case, role: str, real_id: int | None, headers: dict[str, str]) -> None:
        if real_id is not None:
            if case.path_parameters and "id" in case.path_parameters:
                case.path_parameters["id"] = real_id
            if case.path_parameters and "name" in case.path_parameters:
                case.path_parameters["name"] = FUZZ_CLUSTER
            for values in (case.query, case.body):
                if isinstance(values, dict):
                    values.update({key: REAL_NAMES[key] for key in values
                                   if key in REAL_NAMES})
        if case.headers:
            # HTTP servers refuse NUL and line breaks in header values (gunicorn answers
            # 400 before Django sees the request); WSGI in-process would let them through
            case.headers = {k: v.replace("\x00", "").replace("\r", "").replace("\n", "")
                            for k, v in case.headers.items()}
        savepoint = transaction.savepoint()  # each case starts from the same state
        try:
            with _no_on_commit():
                response = case.call(headers=headers)
        finally:
            transaction.savepoint_rollback(savepoint)
        where = f"{role} {case.method} {case.operation.path}"
        label = (f"{case.method} {case.formatted_path} {case.query or ''}"
                 f" body={'' if case.body is schemathesis.types.NotSet else case.body!r:.200}")
        if response.status_code >= 500:
            failures.setdefault(f"{where} {response.status_code}",
                                f"{label} -> {response.get_data()[:300]!r}")
            return
        try:
            case.validate_response(response, checks=CHECKS)
        except AssertionError as exc:
            title = str(exc).strip().splitlines()[0]
            failures.setdefault(f"{where} {response.status_code} {title}",
                                f"{label} -> {str(exc)[:600]}")

    with _test_client_rules():
        for operation in operations:
            sweep(operation)
            real_id = _object_id(operation.path, "member", ids, notifications, webhooks)
            for line in _hostile_bodies(operation, real_id, tokens["member"]):
                failures.setdefault(line, "")
    assert not failures, "\n\n".join(f"{key}\n    {value}" for key, value in failures.items())


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
            path_parameters={"id": real_id} if "{id}" in operation.path
            else {"name": FUZZ_CLUSTER} if "{name}" in operation.path else None)
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
                                       "permission_denied", "method_not_allowed", "not_found",
                                       # an action that reads no body answers from the
                                       # object's state before any parser runs
                                       "webhook_state"):
                failures.append(where + f"{response.status_code} {error['code']}")
    return failures


def _credentials(operation, real_id: int, token: str) -> dict[str, str]:
    """The caller's token; for the SSH servers' reports, which no Keystone token reaches (a
    401 before the body is read), the report token of the workload's pod."""
    if operation.path != "/api/v1/ssh-sessions/":
        return {"X-Auth-Token": token}
    from access.ssh import report_token_for
    from workloads.models import Workload

    workload = Workload.objects.filter(pk=real_id).first()
    if workload is None:
        return {"X-Auth-Token": token}
    return {"X-Auth-Token": token,
            "Authorization": f"Bearer {report_token_for(workload.access.client_id)}"}


@contextlib.contextmanager
def _test_client_rules() -> Iterator[None]:
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


@contextlib.contextmanager
def _no_on_commit() -> Iterator[None]:
    """Tasks a case would queue on commit are captured and dropped (nothing is committed)."""
    with TestCase.captureOnCommitCallbacks(execute=False):
        yield


# what the fuzzer found, kept as plain regression tests
@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/api/v1/workloads/", {"name": "n", "template": "jupyter", "gpu_type": "a1\x0000",
                                    "gpu_count": 1}),
    ("get", "/api/v1/workloads/?owner=%00", None),
    ("get", "/api/v1/tenants/?q=a%00b", None),
    ("get", "/api/v1/tenants/99999999999999999999999/", None),
    ("get", "/api/v1/workloads/99999999999999999999999/events/", None),
])
def test_values_the_database_refuses_are_client_errors(project_token, method, path, body):
    # the member's token is all these need: none addresses the objects the sweep makes
    client = Client(HTTP_X_AUTH_TOKEN=project_token(*ROLES["member"]))
    with transaction.atomic():  # a refused statement must not poison the test's transaction
        response = (client.post(path, body, content_type="application/json")
                    if method == "post" else client.get(path))
        transaction.set_rollback(True)
    assert 400 <= response.status_code < 500, response.content[:300]
    assert set(response.json()) == {"code", "category", "detail", "fields"}
