"""The budget pages: the project's (members, managers, readers: standing, top users, the
chart's JSON) and the admin's overview and form (validated as the API validates, audited)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import TestCase

from audit.models import AuditRecord
from budgets.models import Budget
from tenants.models import Tenant
from tests.budgets.conftest import NOW, run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clock():
    with time_machine.travel(NOW, tick=True):
        yield


@pytest.fixture
def vision(login, gpu_types) -> Tenant:
    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    researcher = get_user_model().objects.get(name="researcher")
    # 3 hours of 2 a100 this month
    run(tenant, researcher, start=NOW - dt.timedelta(hours=5), end=NOW - dt.timedelta(hours=2),
        gpus=2)
    return tenant


def test_the_project_page_shows_the_standing_and_top_users(vision, as_user):
    Budget.objects.create(tenant=vision, gpu_hours=8, hard=True, weights={"t4": 0.25})
    body = as_user("viewer").get("/budget/").content.decode()
    assert "GPU-hour budget of vision-lab" in body
    assert "<strong>6.00</strong> of <strong>8.00</strong> weighted GPU-hours used for " \
           "November 2026" in body
    assert "Hard budget" in body and "t4 × 0.25" in body
    assert "<td>researcher</td><td>6.00</td>" in body
    assert 'data-budget-chart data-url="/budget/chart/"' in body


def test_without_a_budget_the_page_says_so(vision, as_user):
    body = as_user("researcher").get("/budget/").content.decode()
    assert "No GPU-hour budget: 6.00 GPU-hours used this month" in body


def test_the_charts_json(vision, as_user):
    Budget.objects.create(tenant=vision, gpu_hours=8)
    series = as_user("researcher").get("/budget/chart/").json()
    assert series["tenant"] == "vision-lab" and series["budget"] == 8.0
    assert len(series["x"]) == len(series["used"]) == len(series["forecast"]) == 30
    assert series["used"][19] == pytest.approx(6, abs=0.01)  # November 20, till now


def test_the_admins_overview_and_form(vision, login):
    admin = login("admin")
    Budget.objects.create(tenant=vision, gpu_hours=4, hard=True)
    overview = admin.get("/admin/budgets/").content.decode()
    assert f'href="/admin/budgets/{vision.pk}/">vision-lab</a>' in overview
    assert "(used up)" in overview and "hard" in overview
    form = {"period": "quarter", "gpu_hours": "100", "weights": "a100=1, t4=0.25",
            "warn_at": "90, 50", "user_caps": "researcher=40", "hard": "on"}
    with TestCase.captureOnCommitCallbacks(execute=False):
        saved = admin.post(f"/admin/budgets/{vision.pk}/", form)
    assert saved.status_code == 302
    budget = Budget.objects.get(tenant=vision)
    assert (budget.period, budget.gpu_hours, budget.weights, budget.warn_at, budget.user_caps,
            budget.hard, budget.stop_at_exhaustion) == (
        "quarter", 100, {"a100": 1.0, "t4": 0.25}, [50, 90],
        {get_user_model().objects.get(name="researcher").username: 40.0}, True, False)
    # the form shows the cap by the name it was given
    assert 'value="researcher=40"' in admin.get(f"/admin/budgets/{vision.pk}/").content.decode()
    assert AuditRecord.objects.filter(action="budget.set").count() == 1
    # the API's validation: refused, nothing changed
    with TestCase.captureOnCommitCallbacks(execute=False):
        refused = admin.post(f"/admin/budgets/{vision.pk}/",
                             {**form, "gpu_hours": "-5", "weights": "h100=1", "user_caps": "x"})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "gpu_hours: Give a number of GPU-hours from 0" in body
    assert "weights: unknown GPU type(s): h100" in body and "user_caps: &#x27;x&#x27;" in body
    assert Budget.objects.get(tenant=vision).gpu_hours == 100
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert admin.post(f"/admin/budgets/{vision.pk}/remove/").status_code == 302
    assert not Budget.objects.exists()
