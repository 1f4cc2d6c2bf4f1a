"""No input answers 500: times are ISO 8601 with a zone between 2000-01-01 and 2100-01-01 (an
offset cannot carry one out of datetime's range), numbers are bounded and written in ASCII
digits, and the budget forecast saturates. Each case below answered 500 once; now the API
answers 400 naming the field (or the value's plain meaning), and the pages their form's error.
The rules themselves (core/validation.py) are tested at the end."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.test import Client, TestCase
from django.utils import timezone

from budgets.models import Budget
from budgets.selectors import budget_status
from core.validation import (
    EARLIEST,
    LATEST,
    OutOfRange,
    Refused,
    as_whole,
    ascii_digits,
    day,
    excerpt,
    moment,
    whole_number,
)
from tenants.models import Tenant
from tenants.services import quota_update
from tests.fixtures import factories

pytestmark = pytest.mark.django_db

OFFSET_BEFORE_YEAR_1 = "0001-01-01T00:00:00+23:59"  # in UTC: before datetime.min


@pytest.fixture
def vision(login, gpu_types, cluster) -> Tenant:
    login("researcher")  # records vision-lab and its people
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 4}})
    return tenant


@pytest.fixture
def api(project_token):
    def call(user: str, method: str, path: str, body=None, project: str = "vision-lab"):
        client = Client(HTTP_X_AUTH_TOKEN=project_token(user, project))
        with TestCase.captureOnCommitCallbacks(execute=False):
            if body is None:
                return getattr(client, method)(path)
            return getattr(client, method)(path, body, content_type="application/json")
    return call


def refused(response, field: str) -> dict:
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] == "invalid" and body["category"] == "invalid", body
    assert field in body["fields"], body
    return body


# --- the budget forecast ---------------------------------------------------------------------

def test_a_huge_budget_with_a_workload_running_reads_without_overflow(vision, api, login):
    Budget.objects.create(tenant=vision, gpu_hours=Decimal("999999999"))
    factories.make_workload(vision, "researcher", state="running",
                            started_at=timezone.now() - dt.timedelta(hours=1))
    status = budget_status(vision)
    assert status.rate > 0 and status.forecast_exhausted_at is None  # never, this period
    answer = api("admin", "get", f"/api/v1/tenants/{vision.pk}/budget/", project="admin")
    assert answer.status_code == 200, answer.content[:500]
    assert answer.json()["forecast_exhausted_at"] is None
    assert api("researcher", "get", f"/api/v1/tenants/{vision.pk}/budget/").status_code == 200
    assert login("admin").get("/admin/budgets/").status_code == 200


def test_the_forecast_still_says_when_within_the_period(vision):
    Budget.objects.create(tenant=vision, gpu_hours=Decimal("2"))
    factories.make_workload(vision, "researcher", state="running", gpu_count=2,
                            started_at=timezone.now() - dt.timedelta(minutes=30))
    status = budget_status(vision)
    if status.resets_at - status.now > dt.timedelta(hours=1):  # not in a period's last hour
        assert status.now < status.forecast_exhausted_at < status.now + dt.timedelta(hours=1)


# --- times ------------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "since=9999-12-31T00:00:00Z", "since=0001-01-01T00:00:00Z",
    f"since={OFFSET_BEFORE_YEAR_1.replace('+', '%2B')}", "until=9999-12-31T23:59:59Z",
    "since=1999-12-31T23:00:00Z",
])
def test_the_calendar_refuses_times_out_of_range(vision, api, query):
    answer = api("researcher", "get", f"/api/v1/calendar/?gpu_type=a100&{query}")
    body = refused(answer, query.split("=")[0])
    assert "2000-01-01 to 2100-01-01" in " ".join(sum(body["fields"].values(), []))


def test_the_calendar_reads_times_in_range(vision, api):
    answer = api("researcher", "get",
                 "/api/v1/calendar/?gpu_type=a100&since=2099-12-20T00:00:00Z")
    assert answer.status_code == 200, answer.content[:500]


@pytest.mark.parametrize("start", [OFFSET_BEFORE_YEAR_1, "9999-12-31T23:59:59-23:59",
                                   "1970-01-01T00:00:00Z"])
def test_a_reservation_or_window_starting_out_of_range_is_refused(vision, api, start):
    body = {"gpu_type": "a100", "count": 1, "start": start, "end": "2099-01-01T00:00:00Z"}
    refused(api("admin", "post", "/api/v1/reservations/", {**body, "tenant": vision.pk},
                project="admin"), "start")
    refused(api("admin", "post", "/api/v1/maintenance-windows/",
                {"gpu_type": "a100", "reason": "r", "start": start,
                 "end": "2099-01-01T00:00:00Z"}, project="admin"), "start")


def test_the_pages_refuse_a_booking_or_window_out_of_range(vision, login):
    admin = login("admin")
    with TestCase.captureOnCommitCallbacks(execute=False):
        booking = admin.post("/calendar/book/", {
            "tenant": str(vision.pk), "gpu_type": "a100", "count": "1",
            "start": OFFSET_BEFORE_YEAR_1, "end": "2099-01-01T00:00"})
        window = admin.post("/admin/calendar/windows/", {
            "covers": "gpu_type", "gpu_type": "a100", "reason": "r",
            "start": OFFSET_BEFORE_YEAR_1, "end": "2099-01-01T00:00"})
    for answer in (booking, window):
        assert answer.status_code == 400, answer.content[:300]
        assert "2000-01-01 to 2100-01-01" in answer.content.decode()


@pytest.mark.parametrize("query", ["until=9999-12-31", "since=0001-01-01",
                                   "since=2025-02-31", f"since={OFFSET_BEFORE_YEAR_1[:16]}"
                                   "%2B23:59"])
def test_usage_refuses_dates_out_of_range(vision, api, as_user, query):
    field = query.split("=")[0]
    refused(api("researcher", "get", f"/api/v1/usage/?{query}"), field)
    assert as_user("researcher").get(f"/usage/?{query}").status_code in (200, 400)


def test_the_audit_log_refuses_times_out_of_range(vision, api, login):
    query = f"since={OFFSET_BEFORE_YEAR_1.replace('+', '%2B')}"
    refused(api("admin", "get", f"/api/v1/audit/?{query}", project="admin"), "since")
    assert login("admin").get(f"/admin/audit/?{query}").status_code == 200


# --- digits and numbers --------------------------------------------------------------------------

def test_a_rank_of_unicode_digits_is_refused(vision, api):
    workload = factories.make_workload(vision, "researcher", state="running")
    for rank in ("²", "\u0663", "1" * 40):
        answer = api("researcher", "get", f"/api/v1/workloads/{workload.pk}/logs/?rank={rank}")
        refused(answer, "rank")
    refused(api("researcher", "get", f"/api/v1/workloads/{workload.pk}/logs/?tail=\u0663"),
            "tail")


def test_budget_thresholds_and_figures_are_ascii_digits(vision, api, login):
    url = f"/api/v1/tenants/{vision.pk}/budget/"
    for body in ({"period": "month", "gpu_hours": 10, "warn_at": ["²"]},
                 {"period": "month", "gpu_hours": 10, "warn_at": ["\u0663\u0660"]},
                 {"period": "month", "gpu_hours": "\u0661\u0660"}):
        field = "warn_at" if "warn_at" in body else "gpu_hours"
        refused(api("admin", "put", url, body, project="admin"), field)
    assert not Budget.objects.exists()
    page = login("admin").post(f"/admin/budgets/{vision.pk}/",
                               {"period": "month", "gpu_hours": "10", "warn_at": "50, ²"})
    assert page.status_code == 400 and "warn_at" in page.content.decode()


def test_quota_figures_are_ascii_digits(vision, api, login):
    url = f"/api/v1/tenants/{vision.pk}/quota/"
    refused(api("admin", "patch", url, {"gpus_total": "²"}, project="admin"), "gpus_total")
    refused(api("admin", "patch", url, {"gpus_by_type": {"a100": "\u0663"}}, project="admin"),
            "gpus_by_type")
    page = login("admin").post(f"/admin/tenants/{vision.pk}/row/", {"gpus_total": "²"})
    assert page.status_code < 500, page.content[:300]
    vision.quota.refresh_from_db()
    assert vision.quota.gpus_total == 8


def test_launch_and_allowance_figures_are_ascii_digits(vision, api):
    launch = {"name": "n", "template": "jupyter", "gpu_type": "a100", "gpu_count": "\u0661"}
    refused(api("researcher", "post", "/api/v1/workloads/", launch), "gpu_count")
    refused(api("admin", "put", f"/api/v1/tenants/{vision.pk}/reservation-allowance/",
                {"gpu_hours": "\u0661\u0660"}, project="admin"), "gpu_hours")
    assert api("researcher", "post", "/api/v1/workloads/check/",
               {**launch, "gpu_count": "1"}).status_code == 200


def test_usage_of_a_tenant_named_in_unicode_digits_is_not_found(vision, api):
    answer = api("admin", "get", "/api/v1/usage/?tenant=²", project="admin")
    assert answer.status_code == 404 and answer.json()["category"] == "not_found"


def test_the_launch_check_takes_a_runtime_far_beyond_any_quota(vision, as_user):
    page = as_user("researcher").get("/workloads/new/check/", {
        "template": "jupyter", "gpu_type": "a100", "gpu_count": "1",
        "max_runtime_minutes": "1" + "0" * 30})
    assert page.status_code == 200, page.content[:300]


# --- the rules ------------------------------------------------------------------------------------

def test_moment():
    assert moment("2026-12-01T09:00:00+01:00") == dt.datetime(2026, 12, 1, 8, tzinfo=dt.UTC)
    assert moment("2000-01-01T00:00:00Z") == EARLIEST and moment(LATEST) == LATEST
    for text in (OFFSET_BEFORE_YEAR_1, "9999-12-31T23:59:59-23:59", "1999-12-31T23:59:59Z",
                 "2100-01-01T00:00:01Z"):
        with pytest.raises(OutOfRange):
            moment(text)
    for text in ("2026-02-31T00:00:00Z", "2026-12-01T09:00:00", "tomorrow", "2" * 200, None):
        with pytest.raises(Refused):
            moment(text)
    zone = dt.timezone(dt.timedelta(hours=2))
    assert moment("2026-12-01T09:00:00", naive_zone=zone).hour == 7
    with pytest.raises(OutOfRange):
        moment("0001-01-01T00:00:00", naive_zone=zone)


def test_day_and_digits():
    assert day("2026-12-01") == dt.date(2026, 12, 1)
    for text in ("9999-12-31", "0001-01-01"):
        with pytest.raises(OutOfRange):
            day(text)
    with pytest.raises(Refused):
        day("2026-02-31")
    assert ascii_digits("042") and not ascii_digits("²") and not ascii_digits("\u0663") \
        and not ascii_digits("") and not ascii_digits(None)
    assert as_whole(" -12 ") == -12 and as_whole(7) == 7
    assert as_whole(True) is None and as_whole("²") is None and as_whole("1" * 20) is None
    assert whole_number("50", low=1, high=100) == 50
    with pytest.raises(Refused):
        whole_number("101", low=1, high=100)


def test_excerpt():
    assert excerpt("short") == "“short”"
    assert len(excerpt("x" * 200_000)) <= 42 and excerpt("x" * 200_000).endswith("…”")
    assert len(excerpt(["x" * 1000] * 1000)) <= 40
    assert excerpt("k", quotes=False) == "k"
