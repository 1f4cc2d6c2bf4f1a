"""Requests (`requests/`, `requests/{id}/approve/|deny/`): a member asks, an admin or the
project's department admin approves, and the change is applied through the service an admin's
edit uses (audited, before → after), the asker and the project's managers told at each step; a
temporary grant ends by itself at its end, with notice; the refusals: a reader cannot ask,
another project sees 404, nobody decides their own request, a manager is no approver, a decided
request is 409."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase
from django.utils import timezone

from allocations.models import ProjectRecord, ResourceRequest
from allocations.services import requests_end
from audit.models import AuditRecord
from budgets.models import Budget
from calendars.models import Reservation, ReservationAllowance
from notifications.models import Kind, Notification
from tenants.models import Department, Quota, QuotaAdjustment, Tenant
from tenants.services import quota_update

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
MORE_A100 = {"kind": "quota", "details": {"gpu_type": "a100", "gpus": 1},
             "justification": "a paper deadline on Friday"}


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method == "get":
            return client.get(url)
        return getattr(client, method)(url, body or {}, content_type="application/json")


@pytest.fixture
def vision(login, gpu_types, cluster) -> Tenant:
    """vision-lab with no a100 in its quota: a launch of one is refused."""
    for who in ("researcher", "lead", "viewer"):
        login(who)
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 0, "v100": 4},
                          "max_workloads": 10})
    return tenant


def told(request_id: int, step: str) -> set[str]:
    return {n.user.name for n in Notification.objects.filter(
        kind=Kind.REQUEST, key=f"request:{request_id}:{step}")}


def test_a_members_request_approved_lets_the_refused_launch_run(vision, project_token):
    researcher = project_token("researcher", "vision-lab")
    refused = call(researcher, "post", "/api/v1/workloads/", LAUNCH)
    assert refused.status_code == 403 and refused.json()["code"] == "quota_exceeded"

    asked = call(researcher, "post", "/api/v1/requests/", MORE_A100)
    assert asked.status_code == 201, asked.json()
    assert asked.json()["state"] == "pending" and asked.json()["tenant"] == vision.pk
    request_id = asked.json()["id"]
    assert told(request_id, "asked") == {"researcher", "lead"}

    approved = call(project_token("admin", "admin"), "post",
                    f"/api/v1/requests/{request_id}/approve/", {"note": "good luck"})
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == "approved"
    applied = approved.json()["applied"]
    assert (applied["before"]["gpus_total"], applied["after"]["gpus_total"]) == (8, 9)
    assert (applied["before"]["gpus_by_type"]["a100"],
            applied["after"]["gpus_by_type"]["a100"]) == (0, 1)
    assert applied["after"]["gpus_by_type"]["v100"] == 4  # the others as they were
    quota = Quota.objects.get(tenant=vision)
    assert quota.gpus_by_type()["a100"] == 1
    assert told(request_id, "approved") == {"researcher", "lead"}
    audited = AuditRecord.objects.get(action="request.approve")
    assert audited.before["gpus_by_type"]["a100"] == 0
    assert audited.after["gpus_by_type"]["a100"] == 1
    assert AuditRecord.objects.filter(action="quota.update", tenant_id=vision.pk,
                                      actor__name="admin").exists()  # the admin's own service

    launched = call(researcher, "post", "/api/v1/workloads/", LAUNCH)
    assert launched.status_code == 201, launched.json()


def test_a_temporary_grant_ends_by_itself_with_notice(vision, project_token):
    ends = timezone.now() + dt.timedelta(hours=2)
    asked = call(project_token("researcher", "vision-lab"), "post", "/api/v1/requests/",
                 {**MORE_A100, "details": {"gpu_type": "a100", "gpus": 2},
                  "ends_at": ends.isoformat()})
    assert asked.status_code == 201, asked.json()
    request_id = asked.json()["id"]
    approved = call(project_token("admin", "admin"), "post",
                    f"/api/v1/requests/{request_id}/approve/")
    assert approved.status_code == 200, approved.json()
    quota = call(project_token("researcher", "vision-lab"), "get",
                 f"/api/v1/tenants/{vision.pk}/quota/").json()
    assert quota["gpus_by_type"]["a100"] == 0  # as set
    assert quota["in_force"]["gpus_by_type"]["a100"] == 2  # with the grant
    adjustment = QuotaAdjustment.objects.get(source=QuotaAdjustment.Source.REQUEST)
    assert adjustment.ends_at == ends.replace(microsecond=adjustment.ends_at.microsecond)

    assert requests_end(now=ends - dt.timedelta(minutes=1)) == []
    assert requests_end(now=ends) == [request_id]
    assert requests_end(now=ends) == []  # once
    assert ResourceRequest.objects.get(pk=request_id).state == ResourceRequest.State.ENDED
    assert not QuotaAdjustment.objects.filter(source=QuotaAdjustment.Source.REQUEST).exists()
    assert told(request_id, "ended") == {"researcher", "lead"}
    assert AuditRecord.objects.filter(action="request.end").exists()


def test_a_temporary_budget_is_put_back_at_its_end(vision, project_token):
    Budget.objects.create(tenant=vision, gpu_hours=100, hard=True)
    ends = timezone.now() + dt.timedelta(days=7)
    asked = call(project_token("lead", "vision-lab"), "post", "/api/v1/requests/",
                 {"kind": "budget", "details": {"gpu_hours": 500}, "justification": "a course",
                  "ends_at": ends.isoformat()})
    assert asked.status_code == 201, asked.json()
    approved = call(project_token("admin", "admin"), "post",
                    f"/api/v1/requests/{asked.json()['id']}/approve/")
    assert approved.status_code == 200, approved.json()
    assert Budget.objects.get(tenant=vision).gpu_hours == 500
    assert Budget.objects.get(tenant=vision).hard  # the rest of the budget as it was
    requests_end(now=ends)
    assert Budget.objects.get(tenant=vision).gpu_hours == 100


def test_an_allowance_and_a_reservation_beyond_it(vision, project_token):
    lead = project_token("lead", "vision-lab")
    admin = project_token("admin", "admin")
    asked = call(lead, "post", "/api/v1/requests/",
                 {"kind": "allowance", "details": {"gpu_hours": 40}, "justification": "a course"})
    assert call(admin, "post", f"/api/v1/requests/{asked.json()['id']}/approve/"
                ).status_code == 200
    assert ReservationAllowance.objects.get(tenant=vision).gpu_hours == 40
    start = (timezone.now() + dt.timedelta(days=2)).replace(microsecond=0)
    booking = {"gpu_type": "a100", "count": 2, "start": start.isoformat(),
               "end": (start + dt.timedelta(hours=3)).isoformat()}
    asked = call(lead, "post", "/api/v1/requests/",
                 {"kind": "reservation", "details": booking, "justification": "a workshop"})
    assert asked.status_code == 201, asked.json()
    approved = call(admin, "post", f"/api/v1/requests/{asked.json()['id']}/approve/")
    assert approved.status_code == 200, approved.json()
    reservation = Reservation.objects.get(pk=approved.json()["applied"]["after"]["reservation"])
    assert (reservation.tenant, reservation.count, reservation.against_allowance) == (
        vision, 2, False)


def test_a_renewal_lifts_the_hold_of_an_ended_allocation(vision, project_token):
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100": 2}})
    ProjectRecord.objects.create(tenant=vision,
                                 allocation_ends=timezone.localdate() - dt.timedelta(days=1))
    researcher = project_token("researcher", "vision-lab")
    assert call(researcher, "post", "/api/v1/workloads/", LAUNCH).json()["code"] == \
        "allocation_ended"
    ends = timezone.localdate() + dt.timedelta(days=365)
    asked = call(researcher, "post", "/api/v1/requests/",
                 {"kind": "renewal", "details": {"allocation_ends": ends.isoformat()},
                  "justification": "the grant was extended"})
    assert call(project_token("admin", "admin"), "post",
                f"/api/v1/requests/{asked.json()['id']}/approve/").status_code == 200
    assert call(researcher, "post", "/api/v1/workloads/", LAUNCH).status_code == 201


def test_the_refusals(vision, login, project_token):
    login("student")
    login("admin")  # first sight: the admin project's tenant
    researcher = project_token("researcher", "vision-lab")
    viewer = call(project_token("viewer", "vision-lab"), "post", "/api/v1/requests/", MORE_A100)
    assert viewer.status_code == 403
    asked = call(researcher, "post", "/api/v1/requests/", MORE_A100).json()
    url = f"/api/v1/requests/{asked['id']}/"
    assert call(project_token("student", "nlp-lab"), "get", url).status_code == 404
    assert call(project_token("researcher", "nlp-lab"), "get", url).status_code == 404
    # another project's tenant named in the body: a 404, nothing asked
    nlp = Tenant.objects.get(name="nlp-lab")
    assert call(project_token("student", "nlp-lab"), "post", "/api/v1/requests/",
                {**MORE_A100, "tenant": vision.pk}).status_code == 404
    assert not ResourceRequest.objects.filter(tenant=nlp).exists()
    # the project's manager is no approver
    manager = call(project_token("lead", "vision-lab"), "post", url + "approve/")
    assert manager.status_code == 403
    assert ResourceRequest.objects.get(pk=asked["id"]).state == "pending"
    # nobody decides their own, an admin neither
    admin = project_token("admin", "admin")
    own = call(admin, "post", "/api/v1/requests/",
               {**MORE_A100, "tenant": Tenant.objects.get(name="admin").pk}).json()
    answer = call(admin, "post", f"/api/v1/requests/{own['id']}/approve/")
    assert answer.status_code == 403 and answer.json()["code"] == "own_request"
    # decided once
    denied = call(admin, "post", url + "deny/", {"note": "not this month"})
    assert denied.status_code == 200 and denied.json()["note"] == "not this month"
    assert told(asked["id"], "denied") == {"researcher", "lead"}
    again = call(admin, "post", url + "approve/")
    assert again.status_code == 409 and again.json()["code"] == "request_decided"
    assert Quota.objects.get(tenant=vision).gpus_by_type()["a100"] == 0


def test_a_department_admin_decides_its_projects_requests_not_their_own(vision, project_token):
    """lead manages vision-lab, which is also its department's Keystone project."""
    department = Department.objects.create(name="Physics",
                                           keystone_project_id=vision.keystone_project_id)
    Tenant.objects.filter(pk=vision.pk).update(department=department)
    lead = project_token("lead", "vision-lab")
    asked = call(project_token("researcher", "vision-lab"), "post", "/api/v1/requests/",
                 MORE_A100).json()
    approved = call(lead, "post", f"/api/v1/requests/{asked['id']}/approve/")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["decided_by"] == get_user_model().objects.get(name="lead").label
    own = call(lead, "post", "/api/v1/requests/", MORE_A100).json()
    answer = call(lead, "post", f"/api/v1/requests/{own['id']}/approve/")
    assert answer.status_code == 403 and answer.json()["code"] == "own_request"


@pytest.mark.parametrize("body", [
    {**MORE_A100, "kind": "more"},
    {**MORE_A100, "justification": " "},
    {**MORE_A100, "details": {"gpu_type": "nope", "gpus": 1}},
    {**MORE_A100, "details": {"gpu_type": "a100", "gpus": 0}},
    {**MORE_A100, "details": {"gpu_type": "a100", "gpus": 1, "extra": 1}},
    {**MORE_A100, "ends_at": "2020-01-01T00:00:00Z"},
    {"kind": "renewal", "details": {"allocation_ends": "2027-02-30"}, "justification": "x"},
    {"kind": "renewal", "details": {"allocation_ends": "2027-02-01"}, "justification": "x",
     "ends_at": "2027-03-01T00:00:00Z"},
    {"kind": "reservation", "details": {"gpu_type": "a100", "count": 1}, "justification": "x"},
])
def test_bad_input_is_a_400_that_asks_nothing(vision, project_token, body):
    answer = call(project_token("researcher", "vision-lab"), "post", "/api/v1/requests/", body)
    assert answer.status_code == 400, answer.json()
    assert answer.json()["category"] == "invalid"
    assert not ResourceRequest.objects.exists()


def test_deciders_are_told_of_a_new_request_and_of_the_askers_change(vision, login,
                                                                     project_token):
    """The site's admins and the department's admins (lead manages the department's Keystone
    project) hear of a request and of each change its asker makes; the one who acted does
    not. Nobody else changes it, nor anyone once it is decided."""
    login("admin")  # a site admin the portal knows
    department = Department.objects.create(name="Physics",
                                           keystone_project_id=vision.keystone_project_id)
    Tenant.objects.filter(pk=vision.pk).update(department=department)
    researcher = project_token("researcher", "vision-lab")
    asked = call(researcher, "post", "/api/v1/requests/", MORE_A100).json()
    assert told(asked["id"], "to-decide") == {"admin", "lead"}

    url = f"/api/v1/requests/{asked['id']}/"
    changed = call(researcher, "patch", url, {"details": {"gpu_type": "a100", "gpus": 2},
                                              "ends_at": "2099-01-01T00:00:00Z"})
    assert changed.status_code == 400 and "ends_at" in changed.json()["fields"]
    changed = call(researcher, "patch", url, {"details": {"gpu_type": "a100", "gpus": 2}})
    assert changed.status_code == 200, changed.json()
    assert changed.json()["details"] == {"gpu_type": "a100", "gpus": 2}
    assert changed.json()["justification"] == MORE_A100["justification"]  # as it was
    audited = AuditRecord.objects.get(action="request.change")
    assert (audited.before["details"]["gpus"], audited.after["details"]["gpus"]) == (1, 2)
    notices = Notification.objects.filter(kind=Kind.REQUEST,
                                          key__startswith=f"request:{asked['id']}:changed:")
    assert {n.user.name for n in notices} == {"admin", "lead"}  # not the asker
    assert all("2 more a100" in n.text for n in notices)

    # the browser's change form: the same service
    page = login("researcher")
    page.post("/switch-project/", {"project_id": vision.keystone_project_id})
    html = page.get("/requests/").content.decode()
    assert f"Change request {asked['id']}" in html, html[html.find("<main"):]
    answer = page.post(f"/requests/{asked['id']}/change/",
                       {"quota-gpu_type": "a100", "quota-gpus": "3", "justification": "bigger"})
    assert answer.status_code == 302
    row = ResourceRequest.objects.get(pk=asked["id"])
    assert (row.details["gpus"], row.justification) == (3, "bigger")

    lead = project_token("lead", "vision-lab")
    other = call(lead, "patch", url, {"justification": "mine now"})
    assert other.status_code == 403 and other.json()["code"] == "not_the_asker"
    call(project_token("admin", "admin"), "post", url + "deny/")
    late = call(researcher, "patch", url, {"justification": "again"})
    assert late.status_code == 409 and late.json()["code"] == "request_decided"

    own = call(lead, "post", "/api/v1/requests/", MORE_A100).json()
    assert told(own["id"], "to-decide") == {"admin"}  # the asker is not told to decide
