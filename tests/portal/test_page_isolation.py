"""Tenant isolation, proved over every page.

PAGES gives every URL name that Django's resolver serves outside the API, /o/ and static files
a rule; the first test fails when a page is added without one, so no page escapes the matrix
(the API's own matrix, from its OpenAPI schema, is tests/api/test_isolation.py). The rules:
- PUBLIC: anyone (login, health, metrics);
- LOGIN: any signed-in user, whatever their project;
- ADMIN: portal admins only; everyone else 403, whatever the object;
- TENANT_LIST: the current project's rows only (the other tenant's workload is not listed);
- LAUNCH: the current project's tenant, for those who may launch in it (a reader: 403);
- PROJECT: a page about the current project's tenant (its budget), for every role in it: it
  names that project and no other;
- WORKLOAD: one workload, through `scoped_object`: another tenant's is a 404 (never a 403),
  for every method; a write by a reader, or by a member on another member's workload, is 403;
- PERSONAL: one of a user's own rows (a notification, their webhook): another user's is a 404,
  whoever asks (the project's manager and admins included);
- MANAGE: the current project's managers (and admins): a member or reader is refused (403);
  one of another tenant's rows (a reservation) is a 404.
For each, with real Keystone users of two tenants (vision-lab, nlp-lab): an anonymous caller is
sent to the login page; and the positive controls: the same requests succeed for those allowed
to make them, so the 404s and 403s are not an artefact of a missing object.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from allocations.models import ResourceRequest
from billing.models import MonthClose, PriceSheet
from calendars.models import MaintenanceWindow, Reservation
from catalogue.models import GpuType, Template
from clusters.models import Cluster
from credentials.models import Secret
from identity.identity import Identity
from notifications.models import Kind, Notification, Webhook
from storage.models import Dataset, StorageClass, Volume
from tenants.models import Department, Quota, Tenant
from tenants.services import quota_update
from tests.support.database import demo_gpu_types, world_of_the_module
from tests.support.sessions import keystone_identities, signed_in
from usage.models import GpuUsageRollup
from workloads.models import Workload

pytestmark = pytest.mark.django_db

PUBLIC, LOGIN, ADMIN, TENANT_LIST, LAUNCH, WORKLOAD, PERSONAL, PROJECT, MANAGE, OBJECT = (
    "public", "login", "admin", "tenant-list", "launch", "workload", "personal",
    "project", "manage", "object")


@dataclasses.dataclass(frozen=True)
class Page:
    name: str  # the URL name, with its namespace
    rule: str
    method: str = "GET"
    target: str | None = None  # what <pk> names: "workload", "tenant", "gpu_type", "template"
    writes: bool = False  # changes what it addresses: a reader's request is refused
    ok: int = 200  # the positive control's status
    hidden: int = 404  # what another tenant's object answers (a redirect to a 404 for one)
    data: dict | None = None
    htmx: bool = False

    def url(self, world: World, tenant: str = "vision") -> str:
        if self.target is None:
            return reverse(self.name)
        obj = {"workload": world.workloads, "tenant": world.tenants,
               **world.personal}.get(self.target)
        pk = obj[tenant].pk if obj is not None else world.catalogue[self.target].pk
        return reverse(self.name, args=[pk])


PAGES = [
    Page("login", PUBLIC),
    Page("logout", PUBLIC, method="POST", ok=302),  # to the login page
    Page("healthz", PUBLIC),
    Page("readyz", PUBLIC),
    Page("metrics", PUBLIC),
    Page("home", TENANT_LIST),
    Page("switch-project", LOGIN, method="POST", ok=302),
    # the researcher's workload pages
    Page("workloads:list", TENANT_LIST),
    Page("workloads:rows", TENANT_LIST),
    Page("workloads:launch", LAUNCH),
    Page("workloads:launch-check", LAUNCH),
    Page("workloads:launch-fields", LAUNCH, method="POST", htmx=True,
         data={"template": "jupyter"}),
    Page("workloads:detail", WORKLOAD, target="workload"),
    # a workload gone from the live part's view sends the browser to its page, which is a 404
    Page("workloads:live", WORKLOAD, target="workload", hidden=302),
    Page("workloads:stop", WORKLOAD, method="POST", target="workload", writes=True, ok=302),
    Page("workloads:delete", WORKLOAD, method="POST", target="workload", writes=True, ok=302),
    Page("usage:mine", TENANT_LIST),
    Page("usage:workload-series", WORKLOAD, target="workload"),
    Page("usage:workload-still-needed", WORKLOAD, method="POST", target="workload",
         writes=True, ok=302),
    Page("budgets:mine", PROJECT),
    # volumes: the project's list; a member makes their own; the project's are its managers'
    Page("storage:volumes", TENANT_LIST),
    Page("storage:create", LAUNCH, method="POST", ok=400),  # nothing asked: the form again
    Page("storage:grow", MANAGE, method="POST", target="volume", ok=302,
         data={"size_gib": "2"}),
    Page("storage:delete", MANAGE, method="POST", target="volume", ok=302),
    # datasets: those open to the current project (each probe is open to its own alone)
    Page("storage:datasets", TENANT_LIST),
    # a volume's files: everyone's in the project who sees the volume (the probe volume is
    # pending: the page says its storage is not there yet)
    Page("files:browser", OBJECT, target="volume"),
    # secrets: the project's list; a user's own secret is theirs alone (managers and admins too
    # are refused it)
    Page("credentials:list", TENANT_LIST),
    Page("credentials:detail", PERSONAL, target="secret"),
    Page("credentials:delete", PERSONAL, method="POST", target="secret", ok=302),
    Page("budgets:chart", PROJECT),
    # the project's record: every role of the project reads it; admins and the admins of its
    # department change it (the project's own people: 403)
    Page("allocations:record", PROJECT),
    Page("allocations:record-edit", ADMIN, target="tenant"),
    # requests: the project's list and ask form; admins (and department admins) decide
    Page("allocations:requests", TENANT_LIST),
    Page("allocations:request-approve", ADMIN, method="POST", target="request", ok=302),
    Page("allocations:request-deny", ADMIN, method="POST", target="request", ok=302),
    # the asker changes their own (nothing posted: the form's refusal, back to the list)
    Page("allocations:request-change", OBJECT, method="POST", target="request", ok=302),
    # the calendar: everyone's to read; bookings and cancels are managers'
    Page("calendars:calendar", LOGIN),
    Page("calendars:book", MANAGE, method="POST", ok=400),  # nothing asked: the form again
    Page("calendars:cancel", MANAGE, method="POST", target="reservation", ok=302),
    # a month's report: the project's managers (and its department's admins, and admins);
    # prices and closing a month: admins
    Page("billing:report", MANAGE),
    Page("billing:admin-prices", ADMIN),
    Page("billing:admin-prices-save", ADMIN, method="POST", ok=302,
         data={"gpu-a100": "2.50"}),
    Page("billing:admin-month-close", ADMIN, method="POST", ok=302, data={"period": "2020-01"}),
    # a month never closed: the page again, saying so
    Page("billing:admin-month-reopen", ADMIN, method="POST", ok=400,
         data={"period": "2019-01", "reason": "probe"}),
    # the admins'
    Page("calendars:admin", ADMIN),
    Page("calendars:admin-announce", ADMIN, method="POST", ok=400),
    Page("calendars:admin-window-cancel", ADMIN, method="POST", target="window", ok=302),
    Page("calendars:admin-allowance", ADMIN, method="POST", target="tenant", ok=302,
         data={"gpu_hours": "10", "max_days_ahead": "30"}),
    Page("usage:admin", ADMIN),
    Page("budgets:admin", ADMIN),
    Page("storage:admin-classes", ADMIN),
    Page("storage:admin-datasets", ADMIN),
    Page("storage:admin-dataset", ADMIN, target="dataset"),
    Page("storage:admin-dataset-delete", ADMIN, method="POST", target="dataset", ok=302),
    Page("budgets:admin-edit", ADMIN, target="tenant"),
    Page("budgets:admin-remove", ADMIN, method="POST", target="tenant", ok=302),
    Page("usage:gpu-dashboard", ADMIN),
    Page("usage:workload-cull-exempt", ADMIN, method="POST", target="workload", ok=302,
         data={"exempt": "0"}),
    Page("queues", ADMIN),
    Page("tenants:list", ADMIN),
    Page("tenants:detail", ADMIN, target="tenant"),
    Page("tenants:row", ADMIN, target="tenant", ok=302),  # without htmx: to the tenant page
    Page("tenants:reconcile", ADMIN, method="POST", target="tenant", ok=302),
    Page("tenants:pod-security", ADMIN, method="POST", target="tenant", ok=302),
    Page("tenants:delete", ADMIN, method="POST", target="tenant", ok=302),  # unconfirmed
    Page("tenants:restore", ADMIN, method="POST", target="tenant", ok=302),
    Page("audit:list", ADMIN),
    Page("catalogue:gpu-types", ADMIN),
    Page("catalogue:gpu-type-new", ADMIN),
    Page("catalogue:gpu-type-edit", ADMIN, target="gpu_type"),
    Page("catalogue:gpu-type-enabled", ADMIN, method="POST", target="gpu_type", ok=302,
         data={"enabled": "on"}),
    Page("clusters:list", ADMIN),
    Page("clusters:new", ADMIN),
    Page("clusters:detail", ADMIN, target="cluster"),
    Page("catalogue:templates", ADMIN),
    Page("catalogue:template-new", ADMIN),
    Page("catalogue:template-edit", ADMIN, target="template"),
    Page("catalogue:template-enabled", ADMIN, method="POST", target="template", ok=302,
         data={"enabled": "on"}),
    Page("tenants:image-prefixes", ADMIN, target="tenant", ok=302),
    Page("tenants:departments", ADMIN),
    Page("tenants:department-detail", ADMIN, target="department"),
    Page("tenants:department-delete", ADMIN, method="POST", target="department", ok=302),
    Page("tenants:department", ADMIN, method="POST", target="tenant", ok=302,
         data={"department": ""}),
    # the tenant page's SSH switch: admins only
    Page("access-admin:tenant-ssh", ADMIN, method="POST", target="tenant", ok=302,
         data={"ssh_enabled": "on"}),
    # a user's own notifications, settings and webhooks
    Page("notifications:list", LOGIN),
    Page("notifications:bell", LOGIN, htmx=True),
    Page("notifications:read-all", LOGIN, method="POST", ok=302),
    Page("notifications:preferences", LOGIN),
    Page("notifications:webhook-add", LOGIN, method="POST", ok=400),  # no URL: the form again
    Page("notifications:read", PERSONAL, method="POST", target="notification", ok=302),
    Page("notifications:webhook-delete", PERSONAL, method="POST", target="webhook", ok=302),
    # queued for the notifications workers (none runs here)
    Page("notifications:webhook-test", PERSONAL, method="POST", target="webhook", ok=302),
    Page("notifications:webhook-enable", PERSONAL, method="POST", target="webhook", ok=302),
    # a project's webhook waiting for a manager: its managers (and admins) confirm it
    Page("notifications:webhook-confirm", MANAGE, method="POST", target="project_webhook",
         writes=True, ok=302),
]
BY_NAME = {page.name: page for page in PAGES}
SKIPPED_PREFIXES = ("api/", "o/", "static/")


def resolver_pages() -> set[str]:
    """Every named URL the portal serves, but the API's, the OIDC provider's and static."""
    found: set[str] = set()

    def walk(patterns, prefix: str, namespace: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if route.startswith(SKIPPED_PREFIXES):
                continue
            if isinstance(entry, URLResolver):
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry.url_patterns, route, inner)
            elif isinstance(entry, URLPattern):
                assert entry.name, f"the page at {route!r} has no URL name: give it one"
                found.add(namespace + entry.name)

    walk(get_resolver().url_patterns, "", "")
    return found


def test_every_page_has_a_rule():
    missing = resolver_pages() - set(BY_NAME)
    assert not missing, (f"add these pages to PAGES in {__file__} (public, login, admin, a "
                         f"tenant list, launch, or one workload): {sorted(missing)}")
    stale = set(BY_NAME) - resolver_pages()
    assert not stale, f"PAGES lists pages the portal no longer serves: {sorted(stale)}"


# --- the world: two tenants, a workload in each --------------------------------------------

@dataclasses.dataclass
class World:
    identities: dict[str, Identity]
    tenants: dict[str, Tenant]
    workloads: dict[str, Workload]
    catalogue: dict[str, object]
    clients: dict[str, Client] = dataclasses.field(default_factory=dict)
    # "notification"/"webhook" → "vision": researcher's, "nlp": student's
    personal: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)

    def client(self, who: str) -> Client:
        """`who`'s browser, signed in on first use."""
        if who not in self.clients:
            self.clients[who] = self.sign_in(who)
        return self.clients[who]

    def sign_in(self, who: str) -> Client:
        """A browser whose server-side session holds `who`'s Keystone identity, as the login
        form leaves it (tests/support/sessions.py)."""
        return signed_in(self.identities[who])

    def call(self, who: str | None, page: Page, url: str | None = None):
        client = Client() if who is None else self.client(who)
        url = url or page.url(self)
        headers = {"HTTP_HX_REQUEST": "true"} if page.htmx else {}
        # side effects (tasks) are queued on commit: capture them, run none
        with TestCase.captureOnCommitCallbacks(execute=False):
            if page.method == "GET":
                return client.get(url, page.data or {}, **headers)
            return client.post(url, page.data or {}, **headers)


def make_workload(tenant: Tenant, username: str, name: str) -> Workload:
    """A running workload's row as the tracker would have left it (no cluster objects)."""
    workload = Workload.objects.create(
        tenant=tenant, owner=get_user_model().objects.get(name=username), name=name,
        template=Template.objects.get(slug="jupyter"), kind="service",
        gpu_type=GpuType.objects.get(slug="a100"), gpu_count=1,
        image="quay.io/jupyter/pytorch-notebook:cuda12-python-3.12", port=8888, cpu=4,
        memory_gb=16, state=Workload.State.RUNNING, address="192.168.1.245",
        access_token=f"tok-{name}")
    # a minute of use five minutes ago, and its hour as the rollup task leaves it: a report
    # reads whole hours from hour rollups, so in the first five minutes of an hour that minute
    # is counted through its hour (with the minute alone, the test failed then)
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=5)
    for granularity, bucket in ((GpuUsageRollup.Granularity.MINUTE, minute),
                                (GpuUsageRollup.Granularity.HOUR, minute.replace(minute=0))):
        GpuUsageRollup.objects.create(
            granularity=granularity, bucket_start=bucket, workload=workload, tenant=tenant,
            user=workload.owner, gpu_type=workload.gpu_type, gpu_count=1, samples=4,
            util_avg=50.0, util_max=80.0, gpu_seconds_allocated=60.0, gpu_seconds_used=30.0)
    return workload


# who: (Keystone user, the project they are signed in to)
PEOPLE = {"researcher@vision": ("researcher", "vision-lab"),
          "researcher@nlp": ("researcher", "nlp-lab"),
          "student@nlp": ("student", "nlp-lab"),
          "lead@vision": ("lead", "vision-lab"),
          "viewer@vision": ("viewer", "vision-lab"),
          "admin@admin": ("admin", "admin")}
NAMES = {"vision": "visionprobe", "nlp": "nlpprobe"}


@pytest.fixture(scope="module")
def identities(keystone) -> dict[str, Identity]:
    """Each person's Keystone identity, from the real Keystone once for the module."""
    return keystone_identities(PEOPLE)


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker, identities, kubesim) -> Iterator[World]:
    """The world, made once for the module's tests (tests/support/database.py): what a test
    changes in it is rolled back when that test ends."""
    with world_of_the_module(django_db_blocker, kubesim.kubeconfig,
                             lambda: make_world(identities, demo_gpu_types())) as world:
        yield world


@pytest.fixture
def world(shared_world, cluster) -> World:
    """The module's world, its people signed in afresh by each test (a session is a row the
    test's rollback takes back)."""
    return dataclasses.replace(shared_world, clients={})


def make_world(identities: dict[str, Identity], gpu_types: dict[str, GpuType]) -> World:
    world = World(identities=identities, tenants={}, workloads={},
                  catalogue={"gpu_type": gpu_types["a100"],
                             "template": Template.objects.get(slug="jupyter"),
                             "cluster": Cluster.objects.get(home=True),
                             "department": Department.objects.create(name="probe")})
    StorageClass.objects.create(name="standard", expandable=True, is_default=True)
    world.client("researcher@vision")  # first sight: the users, vision-lab and nlp-lab
    world.client("student@nlp")
    for key, name, owner in (("vision", "vision-lab", "researcher"), ("nlp", "nlp-lab", "student")):
        tenant = Tenant.objects.get(name=name)
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 4},
                              "max_workloads": 10})
        world.tenants[key] = tenant
        world.workloads[key] = make_workload(tenant, owner, NAMES[key])
        user = get_user_model().objects.get(name=owner)
        world.personal.setdefault("notification", {})[key] = Notification.objects.create(
            user=user, tenant=tenant, kind=Kind.FINISHED, key=f"probe:{key}",
            title=f"{NAMES[key]} finished")
        world.personal.setdefault("webhook", {})[key] = Webhook.objects.create(
            user=user, url="http://127.0.0.1:9/hook", secret="s" * 64)
        world.personal.setdefault("project_webhook", {})[key] = Webhook.objects.create(
            tenant=tenant, url="http://127.0.0.1:9/hook", secret="s" * 64,
            state=Webhook.State.NEEDS_CONFIRMATION)
        start = timezone.now() + dt.timedelta(days=2)
        world.personal.setdefault("reservation", {})[key] = Reservation.objects.create(
            tenant=tenant, gpu_type=gpu_types["a100"], count=1, start=start,
            end=start + dt.timedelta(hours=2), note=f"{NAMES[key]} course")
        world.personal.setdefault("volume", {})[key] = Volume.objects.create(
            tenant=tenant, owner=user, scope=Volume.Scope.PROJECT, name=f"{NAMES[key]}-data",
            size_gib=1, storage_class="standard", claim_name=f"vol-probe-{key}")
        world.personal.setdefault("secret", {})[key] = Secret.objects.create(
            tenant=tenant, owner=user, scope=Secret.Scope.USER, kind=Secret.Kind.ENV,
            name=f"{NAMES[key]}-token", keys=["PROBE"], object_name=f"portal-secret-probe-{key}")
        world.personal.setdefault("window", {})[key] = MaintenanceWindow.objects.create(
            start=start, end=start + dt.timedelta(hours=2), reason=f"{key} maintenance")
        dataset = Dataset.objects.create(name=f"{NAMES[key]}-set", kind=Dataset.Kind.NFS,
                                         size_gib=1, source={"server": "nfs.example.org",
                                                             "path": f"/{key}"})
        dataset.tenants.set([tenant])
        world.personal.setdefault("request", {})[key] = ResourceRequest.objects.create(
            tenant=tenant, asker=user, kind=ResourceRequest.Kind.QUOTA,
            details={"gpu_type": "a100", "gpus": 1}, justification=f"{NAMES[key]} deadline")
        world.catalogue.setdefault("dataset", dataset)  # vision-lab's: the admin pages'
    return world


def snapshot() -> tuple:
    """What a refused write must leave as it was."""
    return (
        sorted(Workload.objects.values_list("pk", "state", "deleted_at")),
        sorted(Quota.objects.values_list("tenant_id", "max_workloads", "gpus_total")),
        sorted(Tenant.objects.values_list("pk", "state", "allow_root_templates")),
        sorted(Notification.objects.values_list("pk", "read_at")),
        sorted(Webhook.objects.values_list("pk", "url", "state", "created_by_id")),
        sorted(Reservation.objects.values_list("pk", "cancelled_at")),
        sorted(MaintenanceWindow.objects.values_list("pk", "cancelled_at")),
        sorted(Volume.objects.values_list("pk", "size_gib", "deleted_at")),
        sorted(Dataset.objects.values_list("pk", "name", "description", "open_to_all")),
        sorted(ResourceRequest.objects.values_list("pk", "state", "justification", "details")),
        sorted(PriceSheet.objects.values_list("pk", "effective_from", "cpu_hour")),
        sorted(MonthClose.objects.values_list("pk", "month")),
    )


def ids(pages) -> list[str]:
    return [f"{page.method} {page.name}" for page in pages]


NOT_PUBLIC = [p for p in PAGES if p.rule != PUBLIC]
ADMIN_PAGES = [p for p in PAGES if p.rule == ADMIN]
WORKLOAD_PAGES = [p for p in PAGES if p.rule == WORKLOAD]
LIST_PAGES = [p for p in PAGES if p.rule == TENANT_LIST]
READER_REFUSED = [p for p in PAGES if p.rule == LAUNCH or (p.rule == WORKLOAD and p.writes)]
OTHERS_WORKLOAD = [p for p in WORKLOAD_PAGES if p.writes]
PERSONAL_PAGES = [p for p in PAGES if p.rule == PERSONAL]
MANAGE_PAGES = [p for p in PAGES if p.rule == MANAGE]


@pytest.mark.parametrize("page", PERSONAL_PAGES, ids=ids(PERSONAL_PAGES))
@pytest.mark.parametrize("who", ["student@nlp", "lead@vision", "admin@admin"])
def test_another_users_own_row_is_404_whoever_asks(world, page, who):
    world.client(who)  # signed in first: an admin's first sign-in records the admin project
    before = snapshot()
    assert world.call(who, page).status_code == 404
    assert snapshot() == before


@pytest.mark.parametrize("page", NOT_PUBLIC, ids=ids(NOT_PUBLIC))
def test_an_anonymous_caller_is_sent_to_login(world, page):
    before = snapshot()
    response = world.call(None, page)
    assert response.status_code == 302, (response.status_code, response.content[:300])
    assert urlsplit(response["Location"]).path == reverse("login"), response["Location"]
    assert snapshot() == before


@pytest.mark.parametrize("page", ADMIN_PAGES, ids=ids(ADMIN_PAGES))
@pytest.mark.parametrize("who", ["researcher@vision", "lead@vision", "viewer@vision"])
def test_admin_pages_refuse_non_admins(world, page, who):
    before = snapshot()
    assert world.call(who, page).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("page", WORKLOAD_PAGES, ids=ids(WORKLOAD_PAGES))
def test_another_tenants_workload_is_404(world, page):
    """student (member of nlp-lab only) addresses vision-lab's workload."""
    before = snapshot()
    response = world.call("student@nlp", page)
    assert response.status_code == page.hidden, (response.status_code, response.content[:300])
    if page.hidden == 302:  # to the workload's page, which is a 404
        assert world.call("student@nlp", BY_NAME["workloads:detail"],
                          response["Location"]).status_code == 404
    assert NAMES["vision"] not in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("page", WORKLOAD_PAGES, ids=ids(WORKLOAD_PAGES))
def test_the_current_project_decides_not_the_membership(world, page):
    """researcher is a member of both; signed in to nlp-lab, their own vision-lab workload is
    not reachable: 404 (the workload's page offers to switch project instead, and shows
    nothing of the workload)."""
    before = snapshot()
    response = world.call("researcher@nlp", page)
    if page.name == "workloads:detail":
        assert response.status_code == 200
        assert [t.name for t in response.templates][0] == "workloads/other_project.html"
    else:
        assert response.status_code == page.hidden, (response.status_code,
                                                     response.content[:300])
    assert NAMES["vision"] not in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("page", LIST_PAGES, ids=ids(LIST_PAGES))
@pytest.mark.parametrize("who", ["student@nlp", "researcher@nlp"])
def test_lists_show_only_the_current_projects_rows(world, page, who):
    url = page.url(world) + ("?group_by=workload" if page.name == "usage:mine" else "")
    response = world.call(who, page, url)
    assert response.status_code == 200
    body = response.content.decode()
    assert NAMES["vision"] not in body
    if who == "student@nlp":  # their own is there: the page does list rows
        assert NAMES["nlp"] in body


@pytest.mark.parametrize("page", LIST_PAGES, ids=ids(LIST_PAGES))
def test_positive_control_a_list_shows_the_current_projects_rows(world, page):
    url = page.url(world) + ("?group_by=workload" if page.name == "usage:mine" else "")
    body = world.call("researcher@vision", page, url).content.decode()
    assert NAMES["vision"] in body and NAMES["nlp"] not in body


PROJECT_PAGES = [p for p in PAGES if p.rule == PROJECT]
OBJECT_PAGES = [p for p in PAGES if p.rule == OBJECT]


@pytest.mark.parametrize("page", OBJECT_PAGES, ids=ids(OBJECT_PAGES))
@pytest.mark.parametrize("who", ["student@nlp", "researcher@nlp"])
def test_another_projects_object_is_404(world, page, who):
    """Another project's member, or a member of both signed in to the other: 404, and
    nothing of it shown."""
    before = snapshot()
    response = world.call(who, page)
    assert response.status_code == 404, (response.status_code, response.content[:300])
    assert NAMES["vision"] not in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("page", PROJECT_PAGES, ids=ids(PROJECT_PAGES))
@pytest.mark.parametrize(("who", "shown", "hidden"), [
    ("student@nlp", "nlp-lab", "vision-lab"), ("researcher@nlp", "nlp-lab", "vision-lab"),
    ("viewer@vision", "vision-lab", "nlp-lab"), ("researcher@vision", "vision-lab", "nlp-lab")])
def test_a_project_page_shows_the_current_project_alone(world, page, who, shown, hidden):
    response = world.call(who, page)
    assert response.status_code == 200, (response.status_code, response.content[:300])
    body = response.content.decode()
    # what it is about (the project switcher names every project of the user's elsewhere)
    heading = {"allocations:record": "Project {}"}.get(page.name, "budget of {}")
    about = (lambda name: f'"tenant": "{name}"') if response["Content-Type"].startswith(
        "application/json") else heading.format
    assert about(shown) in body and about(hidden) not in body


@pytest.mark.parametrize("page", READER_REFUSED, ids=ids(READER_REFUSED))
def test_a_reader_cannot_launch_or_change(world, page):
    before = snapshot()
    assert world.call("viewer@vision", page).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("page", OTHERS_WORKLOAD, ids=ids(OTHERS_WORKLOAD))
def test_a_member_cannot_change_another_members_workload(world, page):
    """researcher and student are both members of nlp-lab; the workload is student's."""
    before = snapshot()
    assert world.call("researcher@nlp", page, page.url(world, "nlp")).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("page", OTHERS_WORKLOAD, ids=ids(OTHERS_WORKLOAD))
def test_a_manager_may_change_every_workload_of_the_project(world, page):
    assert world.call("lead@vision", page).status_code == page.ok


@pytest.mark.parametrize("page", PAGES, ids=ids(PAGES))
def test_positive_control_the_allowed_caller_succeeds(world, page):
    """The same requests, by someone allowed: the refusals above are not missing objects."""
    who = {PUBLIC: None, ADMIN: "admin@admin", MANAGE: "lead@vision"}.get(page.rule,
                                                                         "researcher@vision")
    response = world.call(who, page)
    assert response.status_code == page.ok, (response.status_code, response.content[:300])
    if page.ok == 302 and who is not None:
        assert urlsplit(response["Location"]).path != reverse("login"), response["Location"]


@pytest.mark.parametrize("page", MANAGE_PAGES, ids=ids(MANAGE_PAGES))
@pytest.mark.parametrize("who", ["researcher@vision", "viewer@vision"])
def test_only_managers_book_and_cancel(world, page, who):
    before = snapshot()
    assert world.call(who, page).status_code == 403
    assert snapshot() == before


MANAGE_TARGETED = [p for p in MANAGE_PAGES if p.target is not None]


@pytest.mark.parametrize("page", MANAGE_TARGETED, ids=ids(MANAGE_TARGETED))
def test_another_tenants_row_is_404_for_a_manager(world, page):
    """lead manages vision-lab; nlp-lab's reservation is not there for them."""
    before = snapshot()
    response = world.call("lead@vision", page, page.url(world, "nlp"))
    assert response.status_code == 404
    assert NAMES["nlp"] not in response.content.decode()
    assert snapshot() == before


TENANT_TARGETED = [p for p in PAGES if p.target is not None and p.rule != PERSONAL]


@pytest.mark.parametrize("page", TENANT_TARGETED, ids=ids(TENANT_TARGETED))
def test_an_admin_reaches_every_tenants_objects(world, page):
    """An admin, signed in to the admin project, reaches nlp-lab's objects on the admins'
    pages; on the researcher's pages, an admin sees every tenant's workload too."""
    response = world.call("admin@admin", page, page.url(world, "nlp"))
    assert response.status_code == page.ok, (response.status_code, response.content[:300])
