"""Departments above projects (`departments/`, `PATCH tenants/{id}/`): admins make, change and
remove them and move projects between them, audited; a project's people see its department and
no other; a department's admins are the managers of its Keystone project and see it with a
token of that project; bad input is a 400 that changes nothing."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase

from audit.models import AuditRecord
from tenants.models import Department, Tenant

pytestmark = pytest.mark.django_db


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method in ("get", "delete"):
            return getattr(client, method)(url)
        return getattr(client, method)(url, body, content_type="application/json")


@pytest.fixture
def labs(login) -> dict[str, Tenant]:
    login("researcher")  # first sight: vision-lab and nlp-lab
    return {t.name: t for t in Tenant.objects.filter(name__in=["vision-lab", "nlp-lab"])}


def test_an_admin_makes_a_department_and_moves_a_project_into_it_audited(labs, project_token):
    admin = project_token("admin", "admin")
    made = call(admin, "post", "/api/v1/departments/",
                {"name": "Physics", "description": "the faculty's GPUs", "gpu_cap": 12,
                 "keystone_project_id": labs["vision-lab"].keystone_project_id})
    assert made.status_code == 201, made.json()
    department = Department.objects.get(pk=made.json()["id"])
    moved = call(admin, "patch", f"/api/v1/tenants/{labs['nlp-lab'].pk}/",
                 {"department": department.pk})
    assert moved.status_code == 200, moved.json()
    assert moved.json()["department"] == department.pk
    assert moved.json()["department_name"] == "Physics"
    shown = call(admin, "get", f"/api/v1/departments/{department.pk}/").json()
    assert shown["tenants"] == ["nlp-lab"] and shown["gpu_cap"] == 12
    changed = call(admin, "patch", f"/api/v1/departments/{department.pk}/", {"gpu_cap": 16})
    assert changed.status_code == 200 and changed.json()["gpu_cap"] == 16
    actions = list(AuditRecord.objects.order_by("pk").values_list("action", "before", "after"))
    assert ("tenant.department", {"department": None}, {"department": "Physics"}) in actions
    assert any(action == "department.update" and before["gpu_cap"] == 12
               and after["gpu_cap"] == 16 for action, before, after in actions)
    removed = call(admin, "delete", f"/api/v1/departments/{department.pk}/")
    assert removed.status_code == 204
    labs["nlp-lab"].refresh_from_db()
    assert labs["nlp-lab"].department is None  # the project stays, in none
    assert AuditRecord.objects.filter(action="department.delete",
                                      before__tenants=["nlp-lab"]).exists()


def test_a_projects_people_see_its_department_and_no_other(labs, project_token):
    physics = Department.objects.create(name="Physics")
    biology = Department.objects.create(name="Biology")
    Tenant.objects.filter(pk=labs["vision-lab"].pk).update(department=physics)
    Tenant.objects.filter(pk=labs["nlp-lab"].pk).update(department=biology)
    viewer = project_token("viewer", "vision-lab")
    listed = call(viewer, "get", "/api/v1/departments/").json()
    assert [row["name"] for row in listed["results"]] == ["Physics"]
    assert call(viewer, "get", f"/api/v1/departments/{biology.pk}/").status_code == 404
    refused = call(project_token("lead", "vision-lab"), "patch",
                   f"/api/v1/departments/{physics.pk}/", {"name": "Mine"})
    assert refused.status_code == 403
    physics.refresh_from_db()
    assert physics.name == "Physics"


def test_a_departments_admins_are_the_managers_of_its_keystone_project(labs, project_token):
    """lead manages vision-lab, the project the department names: with its token they see the
    department and its projects; researcher, a member there, administers nothing."""
    department = Department.objects.create(
        name="Physics", keystone_project_id=labs["vision-lab"].keystone_project_id)
    Tenant.objects.filter(pk=labs["nlp-lab"].pk).update(department=department)
    lead = call(project_token("lead", "vision-lab"), "get", "/api/v1/departments/").json()
    assert [(row["name"], row["tenants"]) for row in lead["results"]] == [
        ("Physics", ["nlp-lab"])]
    member = call(project_token("researcher", "vision-lab"), "get",
                  "/api/v1/departments/").json()
    assert member["results"] == []


@pytest.mark.parametrize("body", [
    {"name": ""}, {"name": "x" * 101}, {"name": "Phys\u202eics"}, {"gpu_cap": -1},
    {"name": "Ok", "keystone_project_id": "not a project id!"}, {"name": "Physics"},
])
def test_bad_input_is_a_400_that_changes_nothing(labs, project_token, body):
    Department.objects.create(name="Physics")
    answer = call(project_token("admin", "admin"), "post", "/api/v1/departments/", body)
    assert answer.status_code == 400, answer.json()
    assert answer.json()["category"] == "invalid"
    assert Department.objects.count() == 1


def test_moving_a_project_into_no_such_department_is_a_400(labs, project_token):
    answer = call(project_token("admin", "admin"), "patch",
                  f"/api/v1/tenants/{labs['vision-lab'].pk}/", {"department": 999999})
    assert answer.status_code == 400 and "department" in answer.json()["fields"]
