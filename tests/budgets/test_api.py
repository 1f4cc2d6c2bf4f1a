"""The budget API (`tenants/{id}/budget/`): admins write, the tenant's members, managers and
readers read, another tenant's is a 404, bad input is a 400 that changes nothing, every change
is audited; and at launch: a hard budget used up refuses with 403 `budget_exhausted` (API and
page), a soft one does not, a user's cap refuses them alone; a launch whose maximum runtime
would cross the budget is told so before submit (`POST workloads/check/`, the page's check)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client, TestCase

from audit.models import AuditRecord
from budgets.models import Budget
from tenants.models import Tenant
from tenants.services import quota_update
from tests.budgets.conftest import NOW, run

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
BODY = {"period": "month", "gpu_hours": 10, "weights": {"a100": 1, "t4": 0.25}, "hard": True,
        "warn_at": [80, 50, 80], "stop_at_exhaustion": False, "user_caps": {"researcher": 8}}


@pytest.fixture(autouse=True)
def clock():
    """Mid-November 2026 (the clock runs on: Keystone's tokens are real)."""
    with time_machine.travel(NOW, tick=True):
        yield


@pytest.fixture
def vision(login, gpu_types, cluster) -> Tenant:
    login("researcher")
    login("student")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 4},
                          "max_workloads": 20, "max_runtime_minutes": 0})
    return tenant


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method in ("get", "delete"):
            return getattr(client, method)(url)
        return getattr(client, method)(url, body, content_type="application/json")


def url(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.pk}/budget/"


def test_an_admin_sets_reads_and_removes_a_budget_audited(vision, project_token):
    admin = project_token("admin", "admin")
    answer = call(admin, "put", url(vision), BODY)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    researcher = get_user_model().objects.get(name="researcher")
    # caps are kept (and answered) by Keystone user id
    assert {k: body[k] for k in BODY} == {**BODY, "warn_at": [50, 80],
                                          "user_caps": {researcher.username: 8}}
    assert set(body) >= {"used", "remaining", "percent", "forecast_exhausted_at", "resets_at",
                         "period_start", "exhausted", "by_user", "burn_rate"}
    assert body["resets_at"] == "2026-12-01T00:00:00Z"
    assert (body["used"], body["remaining"], body["exhausted"]) == (0.0, 10.0, False)
    record = AuditRecord.objects.get(action="budget.set")
    assert record.before is None and record.after["gpu_hours"] == "10"
    # a change: before → after
    assert call(admin, "put", url(vision), {**BODY, "gpu_hours": 12.5}).status_code == 200
    change = AuditRecord.objects.filter(action="budget.set").order_by("id").last()
    assert (change.before["gpu_hours"], change.after["gpu_hours"]) == ("10", "12.5")
    assert call(admin, "delete", url(vision)).status_code == 204
    assert not Budget.objects.exists()
    assert AuditRecord.objects.get(action="budget.delete").before["gpu_hours"] == "12.5"
    # without a budget: no limit, the month's use still shown
    plain = call(admin, "get", url(vision)).json()
    assert (plain["gpu_hours"], plain["remaining"], plain["period"]) == (None, None, "month")


def test_members_managers_and_readers_read_only_admins_write(vision, project_token, users_of):
    Budget.objects.create(tenant=vision, gpu_hours=10)
    for who in ("researcher", "lead", "viewer"):
        token = project_token(who, "vision-lab")
        assert call(token, "get", url(vision)).json()["gpu_hours"] == 10.0
        for method in ("put", "delete"):
            refused = call(token, method, url(vision), BODY)
            assert refused.status_code == 403, (who, method)
            assert refused.json()["code"] == "permission_denied"
    assert Budget.objects.get().gpu_hours == 10
    assert not AuditRecord.objects.filter(action__startswith="budget.").exists()


def test_another_tenants_budget_is_404(vision, project_token):
    Budget.objects.create(tenant=vision, gpu_hours=10)
    token = project_token("student", "nlp-lab")
    for method in ("get", "put", "delete"):
        answer = call(token, method, url(vision), BODY)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    assert Budget.objects.get().gpu_hours == 10


@pytest.mark.parametrize(("change", "field"), [
    ({"period": "week"}, "period"),
    ({"gpu_hours": -1}, "gpu_hours"),
    ({"gpu_hours": "lots"}, "gpu_hours"),
    ({"weights": {"a100": -1}}, "weights"),
    ({"weights": {"h100": 1}}, "weights"),
    ({"warn_at": [0, 50]}, "warn_at"),
    ({"warn_at": [50, 101]}, "warn_at"),
    ({"hard": "maybe"}, "hard"),
    ({"user_caps": {"researcher": -3}}, "user_caps"),
])
def test_bad_input_is_400_and_changes_nothing(vision, project_token, change, field):
    Budget.objects.create(tenant=vision, gpu_hours=10)
    answer = call(project_token("admin", "admin"), "put", url(vision), {**BODY, **change})
    assert answer.status_code == 400
    assert set(answer.json()["fields"]) == {field}
    assert Budget.objects.get().gpu_hours == 10
    assert not AuditRecord.objects.filter(action__startswith="budget.").exists()


def test_a_missing_required_field_is_400(vision, project_token):
    answer = call(project_token("admin", "admin"), "put", url(vision), {"period": "month"})
    assert answer.status_code == 400 and set(answer.json()["fields"]) == {"gpu_hours"}
    assert not Budget.objects.exists()


# --- at launch ---------------------------------------------------------------------------------

@pytest.fixture
def users_of(vision):
    model = get_user_model()
    return lambda name: model.objects.get(name=name)


def used_ten_hours(vision, users_of) -> None:
    """researcher ran 2 a100 for 4 hours, student 2 a100 for 1 hour: 10 GPU-hours."""
    run(vision, users_of("researcher"), start=NOW - dt.timedelta(hours=30),
        end=NOW - dt.timedelta(hours=26), gpus=2)
    run(vision, users_of("student"), start=NOW - dt.timedelta(hours=20),
        end=NOW - dt.timedelta(hours=19), gpus=2)


def test_a_hard_budget_used_up_refuses_the_next_launch(vision, project_token, users_of):
    used_ten_hours(vision, users_of)
    Budget.objects.create(tenant=vision, gpu_hours=10, hard=True)
    refused = call(project_token("researcher", "vision-lab"), "post", "/api/v1/workloads/",
                   LAUNCH)
    assert refused.status_code == 403
    assert refused.json() == {
        "code": "budget_exhausted", "category": "admission", "fields": {},
        "detail": "vision-lab has used 10.0 of its 10 GPU-hours for November 2026 (hard "
                  "budget); launches are refused until 2026-12-01."}
    assert vision.workloads.filter(name="probe").count() == 0


def test_a_soft_budget_used_up_does_not_refuse(vision, project_token, users_of):
    used_ten_hours(vision, users_of)
    Budget.objects.create(tenant=vision, gpu_hours=10, hard=False)
    answer = call(project_token("researcher", "vision-lab"), "post", "/api/v1/workloads/", LAUNCH)
    assert answer.status_code == 201, answer.json()


def test_a_user_over_their_cap_is_refused_others_are_not(vision, project_token, users_of):
    used_ten_hours(vision, users_of)
    Budget.objects.create(tenant=vision, gpu_hours=100, hard=True,
                          user_caps={users_of("researcher").username: 8,
                                     users_of("student").username: 8})
    refused = call(project_token("researcher", "vision-lab"), "post", "/api/v1/workloads/",
                   LAUNCH)
    assert refused.status_code == 403 and refused.json()["code"] == "budget_exhausted"
    assert "researcher has used 8.0 of their cap of 8 GPU-hours in vision-lab" in \
        refused.json()["detail"]
    ok = call(project_token("lead", "vision-lab"), "post", "/api/v1/workloads/", LAUNCH)
    assert ok.status_code == 201, ok.json()


def test_the_launch_page_shows_the_refusal(vision, as_user, users_of):
    used_ten_hours(vision, users_of)
    Budget.objects.create(tenant=vision, gpu_hours=10, hard=True)
    page = as_user("researcher")
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = page.post("/workloads/new/", {**LAUNCH, "idempotency_key": "k1"})
    assert response.status_code == 403
    assert "launches are refused until 2026-12-01" in response.content.decode()
    assert vision.workloads.filter(name="probe").count() == 0


def test_a_launch_crossing_the_budget_is_told_before_submit(vision, project_token, users_of,
                                                           as_user):
    used_ten_hours(vision, users_of)
    Budget.objects.create(tenant=vision, gpu_hours=12, hard=True, weights={"t4": 0.5})
    token = project_token("researcher", "vision-lab")
    # 3 hours × 2 t4 × 0.5 = 3 GPU-hours, 2 left
    check = call(token, "post", "/api/v1/workloads/check/",
                 {**LAUNCH, "gpu_type": "t4", "gpu_count": 2, "max_runtime_minutes": 180})
    assert check.status_code == 200, check.json()
    notes = check.json()["notes"]
    assert [n["level"] for n in notes] == ["warning"]
    assert "3 h × 2 t4 GPUs × weight 0.5 = 3.0 GPU-hours) would cross what is left of " \
           "vision-lab's budget: 2.0 of 12 GPU-hours for November 2026" in notes[0]["message"]
    # within what is left: nothing to tell; and nothing was launched either way
    fits = call(token, "post", "/api/v1/workloads/check/",
                {**LAUNCH, "gpu_type": "t4", "gpu_count": 1, "max_runtime_minutes": 120})
    assert fits.json()["notes"] == []
    assert vision.workloads.filter(name="probe").count() == 0
    # the launch page's live check tells the same
    live = as_user("researcher").get("/workloads/new/check/", {
        "gpu_type": "t4", "gpu_count": "2", "template": "jupyter", "max_runtime_minutes": "180"})
    assert "would cross what is left of vision-lab&#x27;s budget" in live.content.decode()
