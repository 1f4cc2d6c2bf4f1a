"""Prices and monthly reports (`prices/`, `reports/usage/`, `reports/months/`): a month's
report as CSV adds up, to the cent, the known workloads' GPU-hours × the prices in force
(a price change mid-month charges each part at its own price; a quarter of a T4 costs a
quarter); a closed month's statement does not move when the figures under it do; admins set
prices (audited, before → after) and every signed-in caller reads them; managers read their
project's report, a department's admins their department's, members and readers none, and
another project is a 404."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase
from django.utils import timezone

from audit.models import AuditRecord
from billing.models import GpuPrice, MonthClose, PriceSheet, StatementLine
from billing.selectors import lines_computed
from billing.services import months_close_due
from tenants.models import Department, Tenant
from tests.fixtures.factories import make_workload
from tests.support.billing import PRICES, at

pytestmark = pytest.mark.django_db

def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method == "get":
            return client.get(url, body or {})
        return getattr(client, method)(url, body, content_type="application/json")


def set_prices(project_token, body) -> None:
    response = call(project_token("admin", "admin"), "put", "/api/v1/prices/", body)
    assert response.status_code == 200, response.json()


def report_csv(token: str, **query) -> list[dict[str, str]]:
    response = call(token, "get", "/api/v1/reports/usage/",
                    {"period": "2025-11", "format": "csv", **query})
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


# each line: its exact quantity × its price, rounded once, half up, to the cent
VISION = {"a100": Decimal("30.49"),  # 13 GPU-hours × 2.3456 = 30.4928
          "t4-shared": Decimal("32.40"),  # 48 h × 3 × 1/4 = 36 GPU-hours × 0.90
          "v100": Decimal("2.20"),  # 2 h × 1.10
          # (26 + 192 + 8) CPU-hours × 0.0125 = 2.825 (a float would make it 2.82)
          "cpu": Decimal("2.83"),
          "storage": Decimal("5.00")}  # 100 GiB-months × 0.05
NLP_BEFORE_CHANGE = {"a100": Decimal("0.78"),  # 1/3 h × 2.3456 = 0.78186…
                     "cpu": Decimal("0.02")}  # 4/3 CPU-hours × 0.0125 = 0.01666…


def test_the_november_report_as_csv_is_the_workloads_hours_times_the_prices(
        november, project_token):
    set_prices(project_token, PRICES)
    # from the 20th an a100 hour costs 3.00: nlp-lab's run on the 30th is charged at it
    set_prices(project_token, {**PRICES, "effective_from": "2025-11-20",
                               "gpu": {**PRICES["gpu"], "a100": "3.00"}})
    nlp_after = {"a100": Decimal("12.00"),  # 2 h × 2 GPUs × 3.00
                 "cpu": Decimal("0.20")}  # 2 h × 4 CPUs × 2 nodes × 0.0125
    rows = report_csv(project_token("admin", "admin"), group_by="tenant")
    by_tenant = {row["tenant"]: row for row in rows}
    vision, nlp, total = by_tenant["vision-lab"], by_tenant["nlp-lab"], rows[-1]
    assert [row["tenant"] for row in rows[:-1]] == ["nlp-lab", "vision-lab"]
    assert total["tenant_id"] == "total"
    assert Decimal(vision["cost"]) == sum(VISION.values()) == Decimal("72.92")
    assert Decimal(vision["gpu_cost"]) == VISION["a100"] + VISION["t4-shared"] + VISION["v100"]
    assert Decimal(vision["gpu_hours_a100"]) == Decimal("13.0000")
    assert Decimal(vision["gpu_hours_t4-shared"]) == Decimal("36.0000")
    assert Decimal(vision["gpu_hours_v100"]) == Decimal("2.0000")
    assert Decimal(vision["gpu_hours"]) == Decimal("51.0000")
    assert Decimal(vision["cpu_hours"]) == Decimal("226.0000")
    assert Decimal(vision["storage_gib_months"]) == Decimal("100.0000")
    assert Decimal(nlp["gpu_hours_a100"]) == Decimal("4.3333")
    assert Decimal(nlp["cost"]) == sum(NLP_BEFORE_CHANGE.values()) + sum(nlp_after.values()) \
        == Decimal("13.00")
    assert Decimal(total["cost"]) == Decimal("85.92")
    assert vision["currency"] == "EUR"
    # by department, principal investigator and grant: the same money, grouped otherwise
    by_department = {row["department"]: row for row in report_csv(
        project_token("admin", "admin"), group_by="department")}
    assert Decimal(by_department["Computer Science"]["cost"]) == Decimal("72.92")
    assert Decimal(by_department[""]["cost"]) == Decimal("13.00")
    by_grant = {row["grant"]: row for row in report_csv(project_token("admin", "admin"),
                                                        group_by="grant")}
    assert Decimal(by_grant["ERC-101 + CC-4410"]["cost"]) == Decimal("72.92")
    lead = get_user_model().objects.get(name="lead")
    by_pi = {row["pi_id"]: row for row in report_csv(project_token("admin", "admin"),
                                                     group_by="pi")}
    assert by_pi[lead.username]["pi"] == "lead"
    assert Decimal(by_pi[lead.username]["projects"]) == 1


def test_json_carries_the_same_figures_as_strings(november, project_token):
    set_prices(project_token, PRICES)
    body = call(project_token("admin", "admin"), "get", "/api/v1/reports/usage/",
                {"period": "2025-11", "group_by": "tenant"}).json()
    assert body["period"] == "2025-11" and body["closed"] is False
    vision = next(row for row in body["results"] if row["tenant"] == "vision-lab")
    assert vision["gpu_hours_by_type"] == {"a100": "13.0000", "t4-shared": "36.0000",
                                           "v100": "2.0000"}
    assert vision["cost"] == "72.92"
    assert "gpu_hours_t4-shared" in body["columns"]


def test_a_closed_months_statement_does_not_move(november, project_token):
    set_prices(project_token, PRICES)
    admin = project_token("admin", "admin")
    before = report_csv(admin, group_by="tenant")
    closed = call(admin, "post", "/api/v1/reports/months/", {"period": "2025-11"})
    assert closed.status_code == 201, closed.json()
    assert closed.json()["period"] == "2025-11"
    assert StatementLine.objects.filter(month__month=dt.date(2025, 11, 1)).count() == 7
    # a price change for the closed month is refused; a later one is taken
    refused = call(admin, "put", "/api/v1/prices/", {**PRICES, "effective_from": "2025-11-15"})
    assert refused.status_code == 400 and "effective_from" in refused.json()["fields"]
    set_prices(project_token, {**PRICES, "effective_from": "2025-12-01",
                               "gpu": {"a100": "10.00"}})
    # and whatever moves under the month — its sheet rewritten, a late run recorded — its
    # statement stays
    GpuPrice.objects.filter(sheet__effective_from=dt.date(2025, 1, 1)).update(per_hour=99)
    make_workload(Tenant.objects.get(name="nlp-lab"), "student", gpu_type="a100",
                  state="succeeded", started_at=at(7), finished_at=at(8))
    assert report_csv(admin, group_by="tenant") == before
    body = call(admin, "get", "/api/v1/reports/usage/", {"period": "2025-11"}).json()
    assert body["closed"] is True and body["closed_at"]
    live = sum(ln.cost for ln in lines_computed(dt.date(2025, 11, 1)))
    assert live != Decimal(before[-1]["cost"])  # the live figures did move
    again = call(admin, "post", "/api/v1/reports/months/", {"period": "2025-11"})
    assert again.status_code == 409 and again.json()["code"] == "month_closed"
    assert AuditRecord.objects.filter(action="month.close", target="2025-11").count() == 1


def test_a_month_not_over_cannot_be_closed_and_the_beat_closes_the_last_one(
        november, project_token, settings):
    admin = project_token("admin", "admin")
    response = call(admin, "post", "/api/v1/reports/months/", {"period": "2099-11"})
    assert response.status_code == 409 and response.json()["code"] == "month_not_over"
    settings.PORTAL_BILLING_CLOSE_DELAY_HOURS = 24
    assert months_close_due(now=at(1, 23, month=12)) is None  # within the delay
    closed = months_close_due(now=at(2, 1, month=12))
    assert closed is not None and closed.month == dt.date(2025, 11, 1)
    assert closed.closed_by is None
    assert months_close_due(now=at(2, 2, month=12)) is None  # once
    assert not MonthClose.objects.filter(month=dt.date(2025, 10, 1)).exists()


def test_prices_are_set_by_admins_audited_and_read_by_everyone(november, project_token):
    set_prices(project_token, PRICES)
    changed = {**PRICES, "gpu": {"a100": "2.50"}, "cpu_hour": None}
    set_prices(project_token, changed)
    audit = AuditRecord.objects.filter(action="prices.set").order_by("pk").last()
    assert audit is not None
    assert audit.before["gpu"] == {"a100": "2.3456", "t4-shared": "0.9000", "v100": "1.1000"}
    assert audit.after == {"effective_from": "2025-01-01", "gpu": {"a100": "2.5000"},
                           "cpu_hour": None, "storage_gib_month": "0.0500"}
    read = call(project_token("viewer", "vision-lab"), "get", "/api/v1/prices/").json()
    assert read["currency"] == "EUR"
    assert read["in_force"]["gpu"] == {"a100": "2.5000"}
    assert [sheet["effective_from"] for sheet in read["sheets"]] == ["2025-01-01"]
    refused = call(project_token("lead", "vision-lab"), "put", "/api/v1/prices/", PRICES)
    assert refused.status_code == 403
    assert PriceSheet.objects.get().gpu_prices.count() == 1
    for bad in ({"gpu": {"a100": "-1"}}, {"gpu": {"a100": "1.00001"}},
                {"gpu": {"nonesuch": "1"}}, {"cpu_hour": "NaN"}, {"gpu": {"a100": 1e30}},
                {"effective_from": "2025-13-01"}, {"gpu": ["a100"]}):
        response = call(project_token("admin", "admin"), "put", "/api/v1/prices/", bad)
        assert response.status_code == 400, (bad, response.json())


def test_who_sees_which_report(november, project_token):
    set_prices(project_token, PRICES)
    vision, nlp = (Tenant.objects.get(name=name) for name in ("vision-lab", "nlp-lab"))
    # lead manages vision-lab: its report, no other project's
    rows = report_csv(project_token("lead", "vision-lab"), group_by="tenant")
    assert [row["tenant"] for row in rows[:-1]] == ["vision-lab"]
    assert Decimal(rows[-1]["cost"]) == Decimal("72.92")
    hidden = call(project_token("lead", "vision-lab"), "get", "/api/v1/reports/usage/",
                  {"period": "2025-11", "tenant": str(nlp.pk)})
    assert hidden.status_code == 404
    # members and readers: no report, even of their own project
    for who, project in (("researcher", "vision-lab"), ("viewer", "vision-lab"),
                         ("student", "nlp-lab")):
        response = call(project_token(who, project), "get", "/api/v1/reports/usage/",
                        {"period": "2025-11"})
        assert response.status_code == 403, (who, response.content[:300])
    # lead's project administers the department nlp-lab is in: now nlp-lab's too
    physics = Department.objects.create(name="Physics",
                                        keystone_project_id=vision.keystone_project_id)
    Tenant.objects.filter(pk=nlp.pk).update(department=physics)
    rows = report_csv(project_token("lead", "vision-lab"), group_by="department")
    assert {row["department"]: row["cost"] for row in rows[:-1]} == {
        "Computer Science": "72.92", "Physics": "10.38"}
    # nlp-lab at one price all month: 13/3 GPU-hours × 2.3456 = 10.1643 → 10.16, one line;
    # 52/3 CPU-hours × 0.0125 = 0.2167 → 0.22
    one = report_csv(project_token("lead", "vision-lab"), group_by="tenant", tenant=str(nlp.pk))
    assert [row["tenant"] for row in one[:-1]] == ["nlp-lab"]


def test_bad_queries_are_400(november, project_token):
    admin = project_token("admin", "admin")
    for query in ({"period": "2025-13"}, {"period": "25-11"}, {"group_by": "user"},
                  {"tenant": "x"}, {"period": "2025-1"}):
        response = call(admin, "get", "/api/v1/reports/usage/", query)
        assert response.status_code == 400, (query, response.content[:300])


def test_an_admin_reopens_a_closed_month_and_a_later_close_freezes_it_anew(
        november, project_token, settings):
    """Reopened, a month's statement is dropped and its report worked out afresh (a late run
    counts, a price change for it is taken); the beat leaves it to an admin, whose close
    freezes the new figures. Refused: the month now running, one never closed, no reason, a
    member; each refusal a JSON error."""
    set_prices(project_token, PRICES)
    admin = project_token("admin", "admin")
    url = "/api/v1/reports/months/reopen/"
    never = call(admin, "post", url, {"period": "2025-10", "reason": "a late run"})
    assert never.status_code == 409 and never.json()["code"] == "month_not_closed"
    running = call(admin, "post", url, {"period": f"{timezone.now():%Y-%m}", "reason": "x"})
    assert running.status_code == 409 and running.json()["code"] == "month_running"
    assert running.json()["category"] and running.json()["detail"]

    frozen = report_csv(admin, group_by="tenant")
    assert call(admin, "post", "/api/v1/reports/months/", {"period": "2025-11"}).status_code == 201
    make_workload(Tenant.objects.get(name="nlp-lab"), "student", gpu_type="a100",
                  state="succeeded", started_at=at(7), finished_at=at(8))
    assert report_csv(admin, group_by="tenant") == frozen  # closed: the late run not counted

    for body in ({"period": "2025-11", "reason": "  "}, {"period": "2025-13", "reason": "x"},
                 {"period": "2025-11"}, {"period": "2025-11", "reason": "a\x00b"}):
        refused = call(admin, "post", url, body)
        assert refused.status_code == 400, refused.json()
        assert refused.json()["category"] == "invalid" and refused.json()["fields"]
    member = call(project_token("researcher", "vision-lab"), "post", url,
                  {"period": "2025-11", "reason": "mine"})
    assert member.status_code == 403
    assert MonthClose.objects.filter(month=dt.date(2025, 11, 1)).exists()

    reopened = call(admin, "post", url, {"period": "2025-11", "reason": "nlp-lab's late run"})
    assert reopened.status_code == 200, reopened.json()
    assert reopened.json()["period"] == "2025-11"
    assert reopened.json()["reason"] == "nlp-lab's late run"
    assert not MonthClose.objects.filter(month=dt.date(2025, 11, 1)).exists()
    assert not StatementLine.objects.exists()
    audited = AuditRecord.objects.get(action="month.reopen", target="2025-11")
    assert audited.before["lines"] == 7 and audited.before["cost"] == frozen[-1]["cost"]
    assert audited.after["reason"] == "nlp-lab's late run"
    body = call(admin, "get", "/api/v1/reports/usage/", {"period": "2025-11"}).json()
    assert body["closed"] is False
    worked_out = report_csv(admin, group_by="tenant")
    assert Decimal(worked_out[-1]["cost"]) > Decimal(frozen[-1]["cost"])  # the late run
    again = call(admin, "post", url, {"period": "2025-11", "reason": "twice"})
    assert again.status_code == 409 and again.json()["code"] == "month_not_closed"

    settings.PORTAL_BILLING_CLOSE_DELAY_HOURS = 24
    assert months_close_due(now=at(2, 1, month=12)) is None  # an admin's to close again
    closed = call(admin, "post", "/api/v1/reports/months/", {"period": "2025-11"})
    assert closed.status_code == 201, closed.json()
    GpuPrice.objects.update(per_hour=99)
    assert report_csv(admin, group_by="tenant") == worked_out  # frozen anew
    assert AuditRecord.objects.filter(action="month.close", target="2025-11").count() == 2
