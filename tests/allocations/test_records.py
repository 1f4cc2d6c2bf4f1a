"""A project's record (`tenants/{id}/record/`, the pages): its people read it, admins and the
admins of its department change it (audited, before → after), another project's is a 404; past
the allocation's last day a launch is refused with 403 `allocation_ended` (category admission)
until a later end is set; the managers and the principal investigator are told once as the end
comes near and once when it is past."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase
from django.utils import timezone

from allocations.models import ProjectRecord
from allocations.services import allocations_notify
from audit.models import AuditRecord
from notifications.models import Kind, Notification
from tenants.models import Department, Tenant
from tenants.services import quota_update

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method == "get":
            return client.get(url)
        return getattr(client, method)(url, body, content_type="application/json")


@pytest.fixture
def labs(login, gpu_types, cluster) -> dict[str, Tenant]:
    login("researcher")
    login("lead")
    for name in ("vision-lab", "nlp-lab"):
        quota_update(tenant=Tenant.objects.get(name=name), acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4}, "max_workloads": 10})
    return {t.name: t for t in Tenant.objects.filter(name__in=["vision-lab", "nlp-lab"])}


def url(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.pk}/record/"


def test_an_admin_writes_the_record_and_its_people_read_it(labs, project_token):
    vision = labs["vision-lab"]
    written = call(project_token("admin", "admin"), "patch", url(vision),
                   {"principal_investigator": "lead", "grants": ["ERC-101", "CC-4410"],
                    "field": "computer vision", "allocation_ends": "2027-06-30"})
    assert written.status_code == 200, written.json()
    lead = get_user_model().objects.get(name="lead")
    read = call(project_token("viewer", "vision-lab"), "get", url(vision)).json()
    assert read == {"tenant": vision.pk, "tenant_name": "vision-lab", "department": None,
                    "principal_investigator": lead.username,
                    "principal_investigator_name": lead.label,
                    "grants": ["ERC-101", "CC-4410"], "field": "computer vision",
                    "allocation_ends": "2027-06-30", "held": False}
    audit = AuditRecord.objects.get(action="record.update")
    assert audit.before["grants"] == [] and audit.after["grants"] == ["ERC-101", "CC-4410"]


def test_the_projects_people_may_not_change_it_and_another_project_sees_404(labs, project_token):
    vision = labs["vision-lab"]
    refused = call(project_token("lead", "vision-lab"), "patch", url(vision), {"field": "x"})
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    hidden = call(project_token("student", "nlp-lab"), "get", url(vision))
    assert hidden.status_code == 404
    assert not ProjectRecord.objects.exists()


def test_a_department_admin_changes_its_projects_records_and_no_other(labs, project_token):
    """lead manages vision-lab, the Keystone project of the department nlp-lab is in."""
    department = Department.objects.create(
        name="Physics", keystone_project_id=labs["vision-lab"].keystone_project_id)
    Tenant.objects.filter(pk=labs["nlp-lab"].pk).update(department=department)
    lead = project_token("lead", "vision-lab")
    written = call(lead, "patch", url(labs["nlp-lab"]), {"allocation_ends": "2027-01-31"})
    assert written.status_code == 200, written.json()
    assert written.json()["department"] == "Physics"
    student = project_token("student", "nlp-lab")
    assert call(student, "patch", url(labs["nlp-lab"]), {"field": "x"}).status_code == 403
    # the department's project itself is in no department: its manager cannot change its record
    assert call(lead, "patch", url(labs["vision-lab"]), {"field": "x"}).status_code == 403


@pytest.mark.parametrize("body", [
    {"allocation_ends": "2026-02-31"}, {"allocation_ends": "3000-01-01"},
    {"grants": ["x"] * 21}, {"grants": ["x" * 101]}, {"principal_investigator": "nobody"},
    {"principal_investigator": "student"},  # of nlp-lab, not of vision-lab
    {"field": "x\u200by"},
])
def test_bad_input_is_a_400_that_changes_nothing(labs, project_token, body):
    answer = call(project_token("admin", "admin"), "patch", url(labs["vision-lab"]), body)
    assert answer.status_code == 400, answer.json()
    assert answer.json()["category"] == "invalid"
    assert not ProjectRecord.objects.exists()


def test_past_its_last_day_a_launch_is_refused_until_renewed(labs, project_token):
    vision = labs["vision-lab"]
    yesterday = timezone.localdate() - dt.timedelta(days=1)
    ProjectRecord.objects.create(tenant=vision, allocation_ends=yesterday)
    researcher = project_token("researcher", "vision-lab")
    refused = call(researcher, "post", "/api/v1/workloads/", LAUNCH)
    assert refused.status_code == 403
    assert refused.json()["code"] == "allocation_ended"
    assert refused.json()["category"] == "admission"
    assert f"ended on {yesterday:%Y-%m-%d}" in refused.json()["detail"]
    assert not vision.workloads.exists()
    assert call(researcher, "get", url(vision)).json()["held"] is True
    renewed = call(project_token("admin", "admin"), "patch", url(vision),
                   {"allocation_ends": f"{yesterday + dt.timedelta(days=365):%Y-%m-%d}"})
    assert renewed.status_code == 200 and renewed.json()["held"] is False
    launched = call(researcher, "post", "/api/v1/workloads/", LAUNCH)
    assert launched.status_code == 201, launched.json()


def test_the_last_day_itself_still_launches(labs, project_token):
    ProjectRecord.objects.create(tenant=labs["vision-lab"], allocation_ends=timezone.localdate())
    launched = call(project_token("researcher", "vision-lab"), "post", "/api/v1/workloads/",
                    LAUNCH)
    assert launched.status_code == 201, launched.json()


def test_the_managers_and_the_pi_are_told_once_near_the_end_and_once_past_it(labs):
    vision = labs["vision-lab"]
    researcher = get_user_model().objects.get(name="researcher")
    today = timezone.localdate()
    record = ProjectRecord.objects.create(tenant=vision, principal_investigator=researcher,
                                          allocation_ends=today + dt.timedelta(days=3))
    far = ProjectRecord.objects.create(tenant=labs["nlp-lab"],
                                       allocation_ends=today + dt.timedelta(days=60))
    first = allocations_notify(today=today)
    assert first.ending == ["vision-lab"] and first.ended == []
    assert allocations_notify(today=today).ending == []  # once per end date
    told = Notification.objects.filter(kind=Kind.ALLOCATION, tenant=vision)
    assert {n.user.name for n in told} == {"lead", "researcher"}
    assert all("ends on" in n.title for n in told)
    after = allocations_notify(today=today + dt.timedelta(days=4))
    assert after.ended == ["vision-lab"]
    assert told.filter(title__contains="launches are held").count() == 2
    assert AuditRecord.objects.filter(action="record.held", tenant_id=vision.pk).exists()
    assert not Notification.objects.filter(tenant=far.tenant, kind=Kind.ALLOCATION).exists()
    record.refresh_from_db()
    assert record.ended_told_for == record.allocation_ends
