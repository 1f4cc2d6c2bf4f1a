"""Tenant isolation, proved over every API operation.

ENDPOINTS lists every operation of the OpenAPI schema with what it addresses; the first test
fails when an operation is added without an entry here, so no endpoint escapes the matrix:
- another tenant's object answers 404 (never 403), for every method;
- a token scoped to project A cannot reach project B, even for a user who is a member of both;
- lists show only the caller's tenant, whatever the filters;
- a reader cannot change anything (403, nothing changed);
- non-admins get 403 on admin operations (quota writes, the audit trail);
- a member cannot change another member's workload; a manager can;
- and the positive controls: the same requests succeed for those allowed to make them, so the
  404s and 403s above are not an artefact of a missing object.
A user's own rows (notifications, their webhooks and those webhooks' deliveries: PERSONAL
targets) belong to the person, not the project: another user's is a 404 whoever asks (admins and
the project's managers included), their owner reaches them with any of their projects' tokens,
and a reader may change their own. A project's webhook (PROJECT_WEBHOOK target) is the
project's: its managers and admins manage it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.contrib.auth import get_user_model
from django.test import Client, TestCase

from access.models import TenantServiceAccess
from allocations.models import ProjectRecord, ResourceRequest
from billing.models import GpuPrice, MonthClose, PriceSheet
from budgets.models import Budget
from calendars.models import MaintenanceWindow, Reservation, ReservationAllowance
from catalogue.models import GpuType
from clusters.models import Cluster
from credentials.models import Secret
from credentials.services import secret_create
from notifications.models import Channel, Delivery, Kind, Notification, Webhook
from storage.models import Dataset, StorageClass, Volume
from tenants.models import Department, Quota, Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.database import demo_gpu_types, world_of_the_module
from tests.support.tokens import project_tokens
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@dataclasses.dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # as in the schema: /api/v1/workloads/{id}/stop/
    target: str | None = None  # what {id} (or the query parameter) names: "workload"/"tenant",
    # or one of a user's own rows (PERSONAL: "notification"/"webhook"/"delivery", researcher's
    # in vision), or a project's webhook (PROJECT_WEBHOOK)
    query_param: str | None = None  # the object is named by this query parameter, not {id}
    writes: bool = False
    admin_only: bool = False
    manager_only: bool = False  # the project's managers (and admins)
    lists: str | None = None  # a list of tenant-owned objects: "workload" or "tenant"; or
    # of a user's own rows: "notification", "webhook"
    body: dict[str, Any] | str | None = None  # FULL_QUOTA: the tenant's whole quota, changed
    params: dict[str, str] | None = None  # the query (a GET's, or the path a write names)
    ok: int = 200  # the status of the positive control
    asker_only: bool = False  # a request's asker alone changes it: others who see it get 403

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def id(self) -> str:
        return self.key + (f"?{self.query_param}=" if self.query_param else "")

    def url(self, world: World, tenant: str = "vision") -> str:
        if self.target is None:
            return self.path
        obj = (world.personal[self.target][tenant] if self.target in PERSONAL
               else world.project_webhooks[tenant] if self.target == PROJECT_WEBHOOK
               else world.window if self.target == "window"
               else world.workloads[tenant] if self.target == "workload"
               else world.reservations[tenant] if self.target == "reservation"
               else world.secrets[tenant] if self.target == "secret"
               else world.volumes[tenant] if self.target == "volume"
               else world.datasets[tenant] if self.target == "dataset"
               else world.cluster if self.target == "cluster"
               else world.departments[tenant] if self.target == "department"
               else world.requests[tenant] if self.target == "request"
               else world.tenants[tenant])
        if self.target == "cluster":
            return self.path.replace("{name}", obj.name)
        if self.query_param:
            return f"{self.path}?{self.query_param}={obj.pk}"
        return self.path.replace("{id}", str(obj.pk))


FULL_QUOTA = "full-quota"
PROJECT_WEBHOOK = "project-webhook"  # a webhook of vision-lab's: its managers' and admins'
PERSONAL = ("notification", "webhook", "delivery")
# the cluster's own objects (maintenance windows) and the clusters: everyone's to see
CLUSTER_WIDE = ("window", "cluster")
SOON = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=2)
BOOKING = {"gpu_type": "a100", "count": 1, "start": SOON.isoformat(),
           "end": (SOON + dt.timedelta(hours=1)).isoformat()}
WINDOW = {"nodes": ["gpu-t4-1"], "start": SOON.isoformat(),
          "end": (SOON + dt.timedelta(hours=2)).isoformat(), "reason": "probe"}
PUBLIC_WEBHOOK_URL = "https://93.184.215.14/services/T0/B0/secret"
LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
PROJECT_SECRET = {"name": "probe", "kind": "env", "scope": "project",
                  "data": {"PROBE": "value"}}
QUOTA_PATCH = {"max_workloads": 7}
NEW_DATASET = {"name": "probe-new", "kind": "nfs", "size_gib": 1, "server": "nfs.example.org",
               "path": "/probe"}
NEW_CLUSTER = {"name": "probe-new", "kubeconfig_path": "/nonexistent/probe.kubeconfig"}
SSH_PUBLIC_KEY = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
    serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()

ENDPOINTS = [
    Endpoint("GET", "/api/v1/me/"),
    Endpoint("GET", "/api/v1/gpu-types/"),
    Endpoint("GET", "/api/v1/templates/"),
    Endpoint("GET", "/api/v1/tenants/", lists="tenant"),
    Endpoint("GET", "/api/v1/tenants/{id}/", target="tenant"),
    # a project's department: admins move it
    Endpoint("PATCH", "/api/v1/tenants/{id}/", target="tenant", writes=True, admin_only=True,
             body={"department": None}),
    # departments: a project's people see its own, admins write (each probe holds one project)
    Endpoint("GET", "/api/v1/departments/"),
    Endpoint("POST", "/api/v1/departments/", writes=True, admin_only=True,
             body={"name": "probe-new"}, ok=201),
    Endpoint("GET", "/api/v1/departments/{id}/", target="department"),
    Endpoint("PATCH", "/api/v1/departments/{id}/", target="department", writes=True,
             admin_only=True, body={"description": "probe"}),
    Endpoint("DELETE", "/api/v1/departments/{id}/", target="department", writes=True,
             admin_only=True, ok=204),
    # a project's record: its people read it; admins and its department's admins change it
    Endpoint("GET", "/api/v1/tenants/{id}/record/", target="tenant"),
    Endpoint("PATCH", "/api/v1/tenants/{id}/record/", target="tenant", writes=True,
             admin_only=True, body={"field": "probe"}),
    # requests: a project's people see them, members ask (readers: 403), admins (and the
    # department's admins) decide
    Endpoint("GET", "/api/v1/requests/", lists="request"),
    Endpoint("POST", "/api/v1/requests/", writes=True, ok=201,
             body={"kind": "quota", "details": {"gpu_type": "a100", "gpus": 1},
                   "justification": "probe"}),
    Endpoint("GET", "/api/v1/requests/{id}/", target="request"),
    Endpoint("PATCH", "/api/v1/requests/{id}/", target="request", writes=True,
             asker_only=True, body={"justification": "probe"}),
    Endpoint("POST", "/api/v1/requests/{id}/approve/", target="request", writes=True,
             admin_only=True, body={"note": "probe"}),
    Endpoint("POST", "/api/v1/requests/{id}/deny/", target="request", writes=True,
             admin_only=True, body={"note": "probe"}),
    # prices: every signed-in caller reads them, admins set them; a month's report: a
    # project's managers (and its department's admins, and admins), named by its tenant id;
    # closing a month and the closed months: admins
    Endpoint("GET", "/api/v1/prices/"),
    Endpoint("PUT", "/api/v1/prices/", writes=True, admin_only=True,
             body={"gpu": {"a100": "2.50"}, "cpu_hour": "0.01"}),
    Endpoint("GET", "/api/v1/reports/usage/", target="tenant", query_param="tenant",
             manager_only=True),
    Endpoint("GET", "/api/v1/reports/months/", admin_only=True),
    Endpoint("POST", "/api/v1/reports/months/", writes=True, admin_only=True,
             body={"period": "2020-01"}, ok=201),
    # reopening: past the admin check a month never closed is the service's 409
    Endpoint("POST", "/api/v1/reports/months/reopen/", writes=True, admin_only=True,
             body={"period": "2019-01", "reason": "probe"}, ok=409),
    Endpoint("GET", "/api/v1/tenants/{id}/quota/", target="tenant"),
    Endpoint("PUT", "/api/v1/tenants/{id}/quota/", target="tenant", writes=True,
             admin_only=True, body=FULL_QUOTA),
    Endpoint("PATCH", "/api/v1/tenants/{id}/quota/", target="tenant", writes=True,
             admin_only=True, body=QUOTA_PATCH),
    Endpoint("GET", "/api/v1/tenants/{id}/service-access/", target="tenant"),
    # the GPU-hour budget: its tenant reads it, admins set and remove it
    Endpoint("GET", "/api/v1/tenants/{id}/budget/", target="tenant"),
    Endpoint("PUT", "/api/v1/tenants/{id}/budget/", target="tenant", writes=True,
             admin_only=True, body={"period": "month", "gpu_hours": 100}),
    Endpoint("DELETE", "/api/v1/tenants/{id}/budget/", target="tenant", writes=True,
             admin_only=True, ok=204),
    Endpoint("PATCH", "/api/v1/tenants/{id}/service-access/", target="tenant", writes=True,
             manager_only=True, body={"who": "readers"}),
    Endpoint("GET", "/api/v1/audit/", admin_only=True),
    Endpoint("GET", "/api/v1/workloads/", lists="workload"),
    Endpoint("POST", "/api/v1/workloads/", writes=True, body=LAUNCH, ok=201),
    # what a launch would be told before submitting it (a budget it would cross): no write
    Endpoint("POST", "/api/v1/workloads/check/", body=LAUNCH),
    Endpoint("GET", "/api/v1/workloads/{id}/", target="workload"),
    Endpoint("DELETE", "/api/v1/workloads/{id}/", target="workload", writes=True, ok=204),
    Endpoint("POST", "/api/v1/workloads/{id}/stop/", target="workload", writes=True, ok=202),
    Endpoint("GET", "/api/v1/workloads/{id}/events/", target="workload"),
    Endpoint("GET", "/api/v1/workloads/{id}/logs/", target="workload"),
    # a bearer token for the workload's address: only for those the project's rule admits
    Endpoint("POST", "/api/v1/workloads/{id}/access-token/", target="workload", ok=201),
    # an SSH certificate for the workload: the same rule (the role asked of Keystone now)
    Endpoint("POST", "/api/v1/workloads/{id}/ssh-certificate/", target="workload",
             body={"public_key": SSH_PUBLIC_KEY}, ok=201),
    Endpoint("GET", "/api/v1/workloads/{id}/usage/", target="workload"),
    # usage names its objects in the query: each way is a row of its own
    Endpoint("GET", "/api/v1/usage/", target="tenant", query_param="tenant"),
    Endpoint("GET", "/api/v1/usage/", target="workload", query_param="workload"),
    # the caller's own notifications and webhooks (PERSONAL): marking read, preferences and
    # one's own webhooks change only the caller's rows (writes=False: a reader may)
    Endpoint("GET", "/api/v1/notifications/", lists="notification"),
    Endpoint("POST", "/api/v1/notifications/{id}/read/", target="notification"),
    Endpoint("POST", "/api/v1/notifications/read-all/"),
    Endpoint("GET", "/api/v1/notifications/unread-count/"),
    Endpoint("GET", "/api/v1/notifications/preferences/"),
    Endpoint("PUT", "/api/v1/notifications/preferences/", body={"failed": {"email": False}}),
    Endpoint("GET", "/api/v1/notifications/webhooks/", lists="webhook"),
    Endpoint("POST", "/api/v1/notifications/webhooks/", writes=True, manager_only=True,
             body=PROJECT_WEBHOOK, ok=201),
    Endpoint("DELETE", "/api/v1/notifications/webhooks/{id}/", target="webhook", ok=204),
    # a test is queued (202) with its delivery to poll, seen where the webhook is
    Endpoint("POST", "/api/v1/notifications/webhooks/{id}/test/", target="webhook", ok=202),
    Endpoint("POST", "/api/v1/notifications/webhooks/{id}/enable/", target="webhook"),
    Endpoint("GET", "/api/v1/notifications/deliveries/{id}/", target="delivery"),
    # a project's webhook whose creator is no longer a manager: a manager takes it on
    Endpoint("POST", "/api/v1/notifications/webhooks/{id}/confirm/", target=PROJECT_WEBHOOK,
             writes=True, manager_only=True),
    # the calendar: a tenant's reservations (its managers book within the allowance and
    # cancel), the allowance (admins set it), the maintenance windows (everyone reads them,
    # admins write), a GPU type's calendar
    Endpoint("GET", "/api/v1/reservations/", lists="reservation"),
    Endpoint("POST", "/api/v1/reservations/", writes=True, manager_only=True, body=BOOKING,
             ok=201),
    Endpoint("GET", "/api/v1/reservations/{id}/", target="reservation"),
    Endpoint("DELETE", "/api/v1/reservations/{id}/", target="reservation", writes=True,
             manager_only=True, ok=204),
    Endpoint("GET", "/api/v1/tenants/{id}/reservation-allowance/", target="tenant"),
    Endpoint("PUT", "/api/v1/tenants/{id}/reservation-allowance/", target="tenant", writes=True,
             admin_only=True, body={"gpu_hours": 10}),
    Endpoint("GET", "/api/v1/maintenance-windows/"),
    Endpoint("POST", "/api/v1/maintenance-windows/", writes=True, admin_only=True, body=WINDOW,
             ok=201),
    Endpoint("GET", "/api/v1/maintenance-windows/{id}/", target="window"),
    Endpoint("DELETE", "/api/v1/maintenance-windows/{id}/", target="window", writes=True,
             admin_only=True, ok=204),
    Endpoint("GET", "/api/v1/calendar/", params={"gpu_type": "a100"}),
    # the clusters: every signed-in caller reads names and states, admins write; a project's
    # clusters are read by its people and limited by admins
    Endpoint("GET", "/api/v1/clusters/"),
    Endpoint("POST", "/api/v1/clusters/", writes=True, admin_only=True, body=NEW_CLUSTER,
             ok=201),
    Endpoint("GET", "/api/v1/clusters/{name}/", target="cluster"),
    Endpoint("PATCH", "/api/v1/clusters/{name}/", target="cluster", writes=True,
             admin_only=True, body={"display_name": "probe"}),
    Endpoint("DELETE", "/api/v1/clusters/{name}/", target="cluster", writes=True,
             admin_only=True, ok=204),
    Endpoint("GET", "/api/v1/tenants/{id}/clusters/", target="tenant"),
    Endpoint("PUT", "/api/v1/tenants/{id}/clusters/", target="tenant", writes=True,
             admin_only=True, body={"clusters": ["main"]}),
    # secrets: a project's are seen by its people, written by its managers (a user's own are
    # tested in tests/credentials); no answer holds a value
    Endpoint("GET", "/api/v1/secrets/", lists="secret"),
    Endpoint("POST", "/api/v1/secrets/", writes=True, manager_only=True, body=PROJECT_SECRET,
             ok=201),
    Endpoint("GET", "/api/v1/secrets/{id}/", target="secret"),
    Endpoint("PUT", "/api/v1/secrets/{id}/", target="secret", writes=True, manager_only=True,
             body={"data": {"PROBE": "replaced"}}),
    Endpoint("DELETE", "/api/v1/secrets/{id}/", target="secret", writes=True,
             manager_only=True, ok=204),
    # volumes: a member makes their own, a manager changes the project's (the world's are)
    Endpoint("GET", "/api/v1/volumes/", lists="volume"),
    Endpoint("POST", "/api/v1/volumes/", writes=True, body={"name": "new", "size_gib": 1},
             ok=201),
    Endpoint("GET", "/api/v1/volumes/{id}/", target="volume"),
    Endpoint("PATCH", "/api/v1/volumes/{id}/", target="volume", writes=True, manager_only=True,
             body={"size_gib": 2}),
    Endpoint("DELETE", "/api/v1/volumes/{id}/", target="volume", writes=True,
             manager_only=True, ok=204),
    Endpoint("GET", "/api/v1/storage-classes/"),
    # datasets: each probe is open to its own project only; admins write
    Endpoint("GET", "/api/v1/datasets/", lists="dataset"),
    Endpoint("POST", "/api/v1/datasets/", writes=True, admin_only=True, body=NEW_DATASET,
             ok=201),
    Endpoint("GET", "/api/v1/datasets/{id}/", target="dataset"),
    Endpoint("PATCH", "/api/v1/datasets/{id}/", target="dataset", writes=True,
             admin_only=True, body={"description": "probe"}),
    Endpoint("DELETE", "/api/v1/datasets/{id}/", target="dataset", writes=True,
             admin_only=True, ok=204),
    # a volume's files: whoever sees the volume reads them, whoever may mount it changes them;
    # the probe volumes are still pending, so an allowed caller reaches the volume and is told
    # that its storage is not there yet (409 volume_not_bound), before any file server
    Endpoint("GET", "/api/v1/volumes/{id}/files/", target="volume", ok=409),
    Endpoint("GET", "/api/v1/volumes/{id}/files/content", target="volume",
             params={"path": "probe.txt"}, ok=409),
    Endpoint("PUT", "/api/v1/volumes/{id}/files/content", target="volume", writes=True,
             params={"path": "probe.txt"}, ok=409),
    Endpoint("DELETE", "/api/v1/volumes/{id}/files/content", target="volume", writes=True,
             params={"path": "probe.txt"}, ok=409),
    Endpoint("POST", "/api/v1/volumes/{id}/files/folders/", target="volume", writes=True,
             body={"path": "probe"}, ok=409),
    Endpoint("POST", "/api/v1/volumes/{id}/files/moves/", target="volume", writes=True,
             body={"from": "probe.txt", "to": "moved.txt"}, ok=409),
]
BY_KEY = {endpoint.key: endpoint for endpoint in ENDPOINTS}
# operations no Keystone token reaches: a workload's SSH server reports its sessions with the
# pod's report token (access/ssh.py), a caller with no tenant and no user
REPORT_TOKEN_ONLY = ["POST /api/v1/ssh-sessions/"]


def ids(endpoints) -> list[str]:
    return [endpoint.id for endpoint in endpoints]


def schema_operations() -> set[str]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {f"{method.upper()} {path}" for path, operations in schema["paths"].items()
            for method in operations if method in ("get", "post", "put", "patch", "delete")}


def test_every_api_operation_has_an_entry_in_the_matrix():
    missing = schema_operations() - set(BY_KEY) - set(REPORT_TOKEN_ONLY)
    assert not missing, (f"add these operations to ENDPOINTS in {__file__} (what they address, "
                         f"whether they write, whether they are admin-only): {sorted(missing)}")
    stale = (set(BY_KEY) | set(REPORT_TOKEN_ONLY)) - schema_operations()
    assert not stale, f"ENDPOINTS lists operations the API no longer has: {sorted(stale)}"


# --- the world: two tenants, a workload in each ------------------------------------------------

@pytest.fixture(scope="module")
def tokens(keystone) -> dict[str, str]:
    """Project-scoped tokens, fetched once for the module (Keystone state, not database)."""
    wanted = {"researcher@vision": ("researcher", "vision-lab"),
              "researcher@nlp": ("researcher", "nlp-lab"),
              "student@nlp": ("student", "nlp-lab"),
              "lead@vision": ("lead", "vision-lab"),
              "viewer@vision": ("viewer", "vision-lab"),
              "admin@admin": ("admin", "admin")}
    return project_tokens(keystone.url, wanted)


@dataclasses.dataclass
class World:
    tokens: dict[str, str]
    tenants: dict[str, Tenant]
    workloads: dict[str, Workload]
    # "notification"/"webhook" → "vision": researcher's (vision-lab), "nlp": student's
    personal: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # a webhook of each project: "vision" lead's, "nlp" nobody's now
    project_webhooks: dict[str, Webhook] = dataclasses.field(default_factory=dict)
    reservations: dict[str, Reservation] = dataclasses.field(default_factory=dict)
    secrets: dict[str, Secret] = dataclasses.field(default_factory=dict)  # a project's each
    window: MaintenanceWindow | None = None
    volumes: dict[str, Volume] = dataclasses.field(default_factory=dict)  # a project volume each
    # a dataset open to each project alone
    datasets: dict[str, Dataset] = dataclasses.field(default_factory=dict)
    cluster: Cluster | None = None  # a registered cluster besides the home one
    # a department holding each project alone
    departments: dict[str, Department] = dataclasses.field(default_factory=dict)
    # a pending request of each project's (researcher's in vision, student's in nlp)
    requests: dict[str, ResourceRequest] = dataclasses.field(default_factory=dict)

    def call(self, who: str, endpoint: Endpoint, url: str | None = None, *,
             body: dict[str, Any] | None = None, query: dict[str, str] | None = None):
        url = url or endpoint.url(self)
        if endpoint.params and endpoint.method != "GET":
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(endpoint.params)
        client = Client(HTTP_X_AUTH_TOKEN=self.tokens[who])
        if body is None and endpoint.body is not None:
            body = (endpoint.body if isinstance(endpoint.body, dict)
                    else {"url": PUBLIC_WEBHOOK_URL, "tenant": self.tenants["vision"].pk}
                    if endpoint.body == PROJECT_WEBHOOK else self.full_quota())
        method = getattr(client, endpoint.method.lower())
        # side effects (tasks) are queued on commit: capture them, run none
        with TestCase.captureOnCommitCallbacks(execute=False):
            if endpoint.method in ("GET", "DELETE"):
                return (method(url, query or endpoint.params or {}) if endpoint.method == "GET"
                        else method(url))
            return method(url, body or {}, content_type="application/json")

    def full_quota(self) -> dict[str, Any]:
        from tenants.api.serializers import QuotaSerializer

        data = QuotaSerializer(Quota.objects.get(tenant=self.tenants["vision"])).data
        return {**data, "max_workloads": 7}


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker, tokens, kubesim) -> Iterator[World]:
    """The world, made once for the module's tests (tests/support/database.py): what a test
    changes in it is rolled back when that test ends."""
    with world_of_the_module(django_db_blocker, kubesim.kubeconfig,
                             lambda: make_world(tokens, demo_gpu_types())) as world:
        yield world


@pytest.fixture
def world(shared_world, cluster) -> World:
    return shared_world


def make_world(tokens: dict[str, str], gpu_types: dict[str, GpuType]) -> World:
    world = World(tokens=tokens, tenants={}, workloads={})
    for who in tokens:  # first contact creates users and tenants, as in production
        assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=tokens[who]).status_code == 200
    for key, name in (("vision", "vision-lab"), ("nlp", "nlp-lab")):
        tenant = Tenant.objects.get(name=name)
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 4},
                              "max_workloads": 10})
        world.tenants[key] = tenant
        world.departments[key] = department = Department.objects.create(name=f"{key} probe")
        Tenant.objects.filter(pk=tenant.pk).update(department=department)
        ReservationAllowance.objects.create(tenant=tenant, gpu_hours=1000)
        world.reservations[key] = Reservation.objects.create(
            tenant=tenant, gpu_type=gpu_types["a100"], count=1, start=SOON,
            end=SOON + dt.timedelta(hours=1), note=f"{key} probe")
        tenant_reconcile(tenant_id=tenant.pk)  # its namespace: a secret's value goes there
        world.secrets[key] = secret_create(
            tenant=tenant, acting_user=get_user_model().objects.get(name="admin"),
            name=f"{key}-probe", kind="env", scope="project", data={"PROBE": key})
    StorageClass.objects.create(name="standard", expandable=True, is_default=True)
    for key, creator in (("vision", "lead"), ("nlp", "student")):
        world.volumes[key] = Volume.objects.create(
            tenant=world.tenants[key], owner=get_user_model().objects.get(name=creator),
            scope=Volume.Scope.PROJECT, name="probe", size_gib=1, storage_class="standard",
            claim_name=f"vol-probe-{key}")
    for key in ("vision", "nlp"):
        world.datasets[key] = dataset = Dataset.objects.create(
            name=f"probe-{key}", kind=Dataset.Kind.NFS, size_gib=1,
            source={"server": "nfs.example.org", "path": f"/{key}"})
        dataset.tenants.set([world.tenants[key]])
    # unreachable as its probe saw it: nobody's read of it waits for its answer
    world.cluster = Cluster.objects.create(name="probe", kubeconfig_path="/nonexistent/k",
                                           state=Cluster.State.UNREACHABLE, reason="probe")
    world.window = MaintenanceWindow.objects.create(
        nodes=["gpu-t4-1"], start=SOON, end=SOON + dt.timedelta(hours=1), reason="probe",
        affected={"gpu-t4-1": {"gpu_type": "t4", "gpus": 4}})
    for key, who in (("vision", "researcher@vision"), ("nlp", "student@nlp")):
        response = world.call(who, BY_KEY["POST /api/v1/workloads/"],
                              body={**LAUNCH, "name": f"{key} notebook"})
        assert response.status_code == 201, response.json()
        workload = Workload.objects.get(pk=response.json()["id"])
        assert workload.ssh  # Jupyter's default: its SSH certificate is in the matrix
        world.workloads[key] = workload
    for key, username in (("vision", "researcher"), ("nlp", "student")):
        owner = get_user_model().objects.get(name=username)
        world.personal.setdefault("notification", {})[key] = Notification.objects.create(
            user=owner, tenant=world.tenants[key], kind=Kind.FINISHED, key=f"probe:{key}",
            title=f"{key} probe finished")
        # a loopback URL: the test button's POST is refused at send time, no packet leaves
        hook = world.personal.setdefault("webhook", {})[key] = Webhook.objects.create(
            user=owner, url="http://127.0.0.1:9/hook", secret="s" * 64)
        world.requests[key] = ResourceRequest.objects.create(
            tenant=world.tenants[key], asker=owner, kind=ResourceRequest.Kind.QUOTA,
            details={"gpu_type": "a100", "gpus": 1}, justification=f"{key} probe")
        world.personal.setdefault("delivery", {})[key] = Delivery.objects.create(
            channel=Channel.WEBHOOK, webhook=hook, test=True)
        world.project_webhooks[key] = Webhook.objects.create(
            tenant=world.tenants[key], url="http://127.0.0.1:9/hook", secret="s" * 64,
            created_by=get_user_model().objects.get(name="lead") if key == "vision" else None,
            state=Webhook.State.NEEDS_CONFIRMATION)
    return world


def snapshot(world: World) -> tuple:
    """What a refused write must leave as it was."""
    return (
        sorted(Workload.objects.filter(deleted_at__isnull=True).values_list("pk", "state")),
        sorted(Quota.objects.values_list("tenant_id", "max_workloads", "gpus_total")),
        sorted(TenantServiceAccess.objects.values_list("tenant_id", "who", "allow_public")),
        sorted(Budget.objects.values_list("tenant_id", "gpu_hours", "hard")),
        sorted(Notification.objects.values_list("pk", "read_at")),
        sorted(Webhook.objects.values_list("pk", "user_id", "tenant_id", "url", "state",
                                           "failures", "created_by_id")),
        sorted(Delivery.objects.values_list("pk", "webhook_id", "state")),
        sorted(Reservation.objects.values_list("pk", "tenant_id", "cancelled_at")),
        sorted(ReservationAllowance.objects.values_list("tenant_id", "gpu_hours")),
        sorted(MaintenanceWindow.objects.values_list("pk", "cancelled_at", "state")),
        sorted(Secret.objects.values_list("pk", "name", "keys", "updated_at")),
        sorted(Volume.objects.values_list("pk", "size_gib", "deleted_at")),
        sorted(Dataset.objects.values_list("pk", "name", "description", "open_to_all")),
        sorted(Dataset.tenants.through.objects.values_list("dataset_id", "tenant_id")),
        sorted(Cluster.objects.values_list("pk", "name", "display_name", "enabled")),
        sorted(Tenant.clusters.through.objects.values_list("tenant_id", "cluster_id")),
        sorted(Department.objects.values_list("pk", "name", "description")),
        sorted(Tenant.objects.values_list("pk", "department_id")),
        sorted(ProjectRecord.objects.values_list("tenant_id", "research_field")),
        sorted(ResourceRequest.objects.values_list("pk", "state", "justification")),
        sorted(PriceSheet.objects.values_list("pk", "effective_from", "cpu_hour")),
        sorted(GpuPrice.objects.values_list("pk", "sheet_id", "per_hour")),
        sorted(MonthClose.objects.values_list("pk", "month")),
    )


def assert_error(response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"code", "category", "detail", "fields"}, body
    if code is not None:
        assert body["code"] == code, body


TARGETED = [e for e in ENDPOINTS
            if e.target is not None and e.target not in PERSONAL + CLUSTER_WIDE]
WRITES = [e for e in ENDPOINTS if e.writes]
ADMIN = [e for e in ENDPOINTS if e.admin_only]
MANAGER = [e for e in ENDPOINTS if e.manager_only]
LISTS = [e for e in ENDPOINTS if e.lists and e.lists not in PERSONAL]
OWN_ROWS = [e for e in ENDPOINTS if e.target in PERSONAL]
OWN_LISTS = [e for e in ENDPOINTS if e.lists in PERSONAL]


@pytest.mark.parametrize("endpoint", TARGETED, ids=ids(TARGETED))
def test_another_tenants_object_is_404(world, endpoint):
    """student (member of nlp-lab only) addresses vision-lab's objects."""
    before = snapshot(world)
    assert_error(world.call("student@nlp", endpoint), 404, "not_found")
    assert snapshot(world) == before


@pytest.mark.parametrize("endpoint", TARGETED, ids=ids(TARGETED))
def test_a_token_for_one_project_cannot_act_in_another(world, endpoint):
    """researcher is a member of both; their nlp-lab token addresses their own vision-lab
    workload and tenant: the token's project is the tenant, so 404."""
    before = snapshot(world)
    assert_error(world.call("researcher@nlp", endpoint), 404, "not_found")
    assert snapshot(world) == before


# filters that would find the other tenant's objects if the tenant restriction were missing
PROBES = {
    "workload": [{}, {"owner": "researcher"}, {"state": "submitted"}, {"template": "jupyter"},
                 {"gpu_type": "a100"}, {"ordering": "-created"}, {"page_size": "500"}],
    "tenant": [{}, {"q": "vision"}, {"state": "new"}, {"ordering": "name"},
               {"page_size": "500"}],
    "reservation": [{}, {"gpu_type": "a100"}, {"include_past": "1"},
                    {"page_size": "500"}],
    "secret": [{}, {"page_size": "500"}],
    "volume": [{}, {"scope": "project"}, {"state": "pending"}, {"name": "probe"},
               {"page_size": "500"}],
    "dataset": [{}, {"page_size": "500"}, {"name": "probe-vision"}],
    "request": [{}, {"state": "pending"}, {"page_size": "500"}],
}
LIST_CASES = [(e, query) for e in LISTS for query in PROBES[e.lists or ""]]


@pytest.mark.parametrize(("endpoint", "query"), LIST_CASES,
                         ids=[f"{e.id} {q}" for e, q in LIST_CASES])
@pytest.mark.parametrize("who", ["student@nlp", "researcher@nlp"])
def test_lists_show_only_the_callers_tenant(world, endpoint, query, who):
    response = world.call(who, endpoint, query=query)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) >= {"count", "next", "previous", "results"}
    listed = {row["id"] for row in body["results"]}
    hidden = {"workload": world.workloads, "tenant": world.tenants,
              "reservation": world.reservations,
              "secret": world.secrets,
              "volume": world.volumes,
              "dataset": world.datasets,
              "request": world.requests}[endpoint.lists or ""]["vision"]
    assert hidden.pk not in listed
    if endpoint.lists == "workload":
        assert all(row["tenant"] == "nlp-lab" for row in body["results"])


@pytest.mark.parametrize("endpoint", WRITES, ids=ids(WRITES))
def test_a_reader_cannot_change_anything(world, endpoint):
    before = snapshot(world)
    assert_error(world.call("viewer@vision", endpoint), 403)
    assert snapshot(world) == before


@pytest.mark.parametrize("endpoint", ADMIN, ids=ids(ADMIN))
@pytest.mark.parametrize("who", ["researcher@vision", "lead@vision", "viewer@vision"])
def test_non_admins_get_403_on_admin_operations(world, endpoint, who):
    before = snapshot(world)
    assert_error(world.call(who, endpoint), 403, "permission_denied")
    assert snapshot(world) == before


@pytest.mark.parametrize("endpoint", MANAGER, ids=ids(MANAGER))
@pytest.mark.parametrize("who", ["researcher@vision", "viewer@vision"])
def test_members_and_readers_get_403_on_manager_operations(world, endpoint, who):
    before = snapshot(world)
    assert_error(world.call(who, endpoint), 403, "permission_denied")
    assert snapshot(world) == before


def test_a_reader_gets_no_token_for_a_members_workload(world):
    """The project's default rule admits members: a reader sees the workload, not a way in."""
    assert_error(world.call("viewer@vision", BY_KEY["POST /api/v1/workloads/{id}/access-token/"]),
                 403, "access_denied")


@pytest.mark.parametrize("operation", REPORT_TOKEN_ONLY)
@pytest.mark.parametrize("who", ["researcher@vision", "lead@vision", "admin@admin"])
def test_a_keystone_token_reaches_no_report_token_operation(world, operation, who):
    method, path = operation.split(" ", 1)
    response = getattr(Client(HTTP_X_AUTH_TOKEN=world.tokens[who]), method.lower())(
        path, {"event": "check", "sessions": []}, content_type="application/json")
    assert_error(response, 401)


OTHERS_WORKLOAD = [e for e in TARGETED if e.target == "workload" and e.writes]


@pytest.mark.parametrize("endpoint", OTHERS_WORKLOAD, ids=ids(OTHERS_WORKLOAD))
def test_a_member_cannot_change_another_members_workload(world, endpoint):
    """researcher and student are both members of nlp-lab; the workload is student's."""
    before = snapshot(world)
    assert_error(world.call("researcher@nlp", endpoint, endpoint.url(world, "nlp")), 403,
                 "permission_denied")
    assert snapshot(world) == before


@pytest.mark.parametrize("endpoint", OTHERS_WORKLOAD, ids=ids(OTHERS_WORKLOAD))
def test_a_manager_may_change_every_workload_of_the_project(world, endpoint):
    response = world.call("lead@vision", endpoint)
    assert response.status_code == endpoint.ok, response.content[:500]


@pytest.mark.parametrize("endpoint", OWN_ROWS, ids=ids(OWN_ROWS))
@pytest.mark.parametrize("who", ["student@nlp", "lead@vision", "admin@admin"])
def test_another_users_own_row_is_404_whoever_asks(world, endpoint, who):
    """researcher's notification and webhook: their project's manager and an admin get a 404
    as anyone else does."""
    before = snapshot(world)
    assert_error(world.call(who, endpoint), 404, "not_found")
    assert snapshot(world) == before


@pytest.mark.parametrize("endpoint", OWN_ROWS, ids=ids(OWN_ROWS))
def test_a_users_own_rows_are_theirs_with_any_projects_token(world, endpoint):
    response = world.call("researcher@nlp", endpoint)
    assert response.status_code == endpoint.ok, (response.status_code, response.content[:500])


@pytest.mark.parametrize("endpoint", OWN_LISTS, ids=ids(OWN_LISTS))
@pytest.mark.parametrize("who", ["student@nlp", "lead@vision", "admin@admin"])
def test_own_lists_show_only_the_callers_rows(world, endpoint, who):
    body = world.call(who, endpoint, query={"page_size": "500"}).json()
    listed = {row["id"] for row in body["results"]}
    assert world.personal[endpoint.lists or ""]["vision"].pk not in listed
    if who == "student@nlp":  # their own is there: the list does list rows
        assert world.personal[endpoint.lists or ""]["nlp"].pk in listed


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids(ENDPOINTS))
def test_positive_control_the_allowed_caller_succeeds(world, endpoint):
    """The same requests, by someone allowed: the refusals above are not missing objects."""
    who = ("admin@admin" if endpoint.admin_only
           else "lead@vision" if endpoint.manager_only else "researcher@vision")
    response = world.call(who, endpoint)
    assert response.status_code == endpoint.ok, (response.status_code, response.content[:500])


def in_other_digits(number: int) -> str:
    """The id in Arabic-Indic digits: `\\d` matches them and int() reads them."""
    return "".join(chr(0x0660 + int(digit)) for digit in str(number))


@pytest.mark.parametrize("endpoint", TARGETED, ids=ids(TARGETED))
def test_an_id_in_other_digits_is_no_second_address(world, endpoint):
    """The allowed caller, the object's id written in another script's digits: a 404 and
    nothing changed, never the object itself (an address that caches, proxies and logs would
    take for another)."""
    who = ("admin@admin" if endpoint.admin_only
           else "lead@vision" if endpoint.manager_only else "researcher@vision")
    url = endpoint.url(world)
    pk = str(endpoint_target(world, endpoint).pk)
    url = (url.replace(f"={pk}", f"={in_other_digits(int(pk))}") if endpoint.query_param
           else url.replace(f"/{pk}/", f"/{in_other_digits(int(pk))}/"))
    before = snapshot(world)
    response = world.call(who, endpoint, url)
    assert response.status_code in (400, 404), (response.status_code, response.content[:300])
    assert snapshot(world) == before


def endpoint_target(world: World, endpoint: Endpoint) -> Any:
    return {"workload": world.workloads, "reservation": world.reservations,
            "secret": world.secrets, "volume": world.volumes, "dataset": world.datasets,
            "tenant": world.tenants, "department": world.departments,
            "request": world.requests,
            PROJECT_WEBHOOK: world.project_webhooks}[
        endpoint.target or ""]["vision"]


@pytest.mark.parametrize("endpoint", TARGETED, ids=ids(TARGETED))
def test_an_admin_reaches_every_tenants_objects(world, endpoint):
    response = world.call("admin@admin", endpoint, endpoint.url(world, "nlp"))
    if endpoint.asker_only:  # reached, and refused: nobody changes another's request
        assert_error(response, 403, "not_the_asker")
        return
    assert response.status_code == endpoint.ok, (response.status_code, response.content[:500])


def test_a_launch_goes_to_the_tokens_project_whatever_the_body_says(world):
    """There is no tenant field to smuggle: the body's tenant is ignored."""
    response = world.call("researcher@nlp", BY_KEY["POST /api/v1/workloads/"],
                          body={**LAUNCH, "tenant": world.tenants["vision"].pk,
                                "tenant_id": world.tenants["vision"].pk})
    assert response.status_code == 201, response.json()
    assert Workload.objects.get(pk=response.json()["id"]).tenant == world.tenants["nlp"]
