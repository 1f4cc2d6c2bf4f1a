"""`gpuctl department …` and `gpuctl record …` against the live portal and the real Keystone:
an admin makes a department, puts a project in it and sets its record; the department's admin
(the manager of its Keystone project) sets a record of its project by id; a member reads the
record and may not set it (exit 1, forbidden); a launch past the allocation's end exits 4 as
every admission refusal does."""

from __future__ import annotations

import datetime as dt
import json

from django.utils import timezone

from allocations.models import ProjectRecord
from tenants.models import Department, Tenant
from tenants.services import quota_update
from tests.support.gpuctl import live, openrc, portal, run  # noqa: F401 - the fixture


@live
def test_an_admin_makes_a_department_and_its_admin_sets_a_record(portal, keystone,  # noqa: F811
                                                                 live_server):
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, _, err = run(["whoami"], openrc(keystone, live_server, user="student",
                                          project="nlp-lab"))
    assert code == 0, err  # nlp-lab recorded
    vision, nlp = Tenant.objects.get(name="vision-lab"), Tenant.objects.get(name="nlp-lab")
    code, out, err = run(["department", "create", "Physics", "--admins-project",
                          vision.keystone_project_id, "--gpu-cap", "16", "-o", "json"], admin)
    assert code == 0, err
    department = Department.objects.get(pk=json.loads(out)["id"])
    assert department.gpu_cap == 16
    code, out, err = run(["department", "assign", "nlp-lab", "--department",
                          str(department.pk)], admin)
    assert code == 0, err
    assert "nlp-lab: department Physics" in out
    code, out, err = run(["department", "show", str(department.pk)], admin)
    assert code == 0, err
    assert "in use now: 0 GPU-equivalents of a cap of 16 (16 left)" in out
    assert "GPU TYPE" in out and "LEFT" in out
    code, out, err = run(["department", "update", str(department.pk), "--type-cap", "a100=8",
                          "--type-cap", "v100=2", "--no-gpu-cap"], admin)
    assert code == 0, err
    assert "a100=8, v100=2" in out
    department.refresh_from_db()
    assert (department.gpu_cap, department.gpu_caps_by_type()) == (None, {"a100": 8, "v100": 2})
    code, out, err = run(["department", "list"], admin)
    assert code == 0, err
    assert "Physics" in out and "nlp-lab" in out and "a100=8" in out
    code, _, err = run(["department", "update", str(department.pk), "--type-cap", "a100"], admin)
    assert code == 2 and "TYPE=N" in err

    lead = openrc(keystone, live_server, user="lead", project="vision-lab")
    code, out, err = run(["record", "set", "--project", str(nlp.pk), "--pi", "student",
                          "--grant", "ERC-101", "--grant", "CC-4410", "--field", "NLP",
                          "--ends", "2027-06-30"], lead)
    assert code == 0, err
    assert "ERC-101, CC-4410" in out and "2027-06-30" in out
    record = ProjectRecord.objects.get(tenant=nlp)
    assert (record.principal_investigator.name, record.research_field) == ("student", "NLP")

    student = openrc(keystone, live_server, user="student", project="nlp-lab")
    code, out, err = run(["record", "-o", "json"], student)
    assert code == 0, err
    assert json.loads(out)["grants"] == ["ERC-101", "CC-4410"]
    code, _, err = run(["record", "set", "--field", "mine"], student)
    assert code == 1 and "permission_denied" in err


@live
def test_a_launch_past_the_allocations_end_exits_4(portal, keystone, live_server):  # noqa: F811
    ProjectRecord.objects.create(tenant=Tenant.objects.get(name="vision-lab"),
                                 allocation_ends=timezone.localdate() - dt.timedelta(days=1))
    code, _, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100"], portal)
    assert code == 4
    assert "allocation_ended" in err and "held until it is renewed" in err
    code, out, err = run(["record"], portal)
    assert code == 0, err
    assert "yes: new launches refused until renewed" in out


@live
def test_a_member_asks_an_admin_approves_and_the_launch_runs(portal, keystone,  # noqa: F811
                                                            live_server):
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_by_type": {"a100": 0}})
    code, _, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100"], portal)
    assert code == 4 and "quota_exceeded" in err
    code, out, err = run(["request", "create", "quota", "--detail", "gpu_type=a100",
                          "--detail", "gpus=3", "--why", "paper deadline", "-o", "json"],
                         portal)
    assert code == 0, err
    asked = json.loads(out)
    assert asked["state"] == "pending" and asked["details"] == {"gpu_type": "a100", "gpus": 3}
    code, out, err = run(["request", "change", str(asked["id"]), "--detail", "gpu_type=a100",
                          "--detail", "gpus=1", "-o", "json"], portal)
    assert code == 0, err
    assert json.loads(out)["details"] == {"gpu_type": "a100", "gpus": 1}
    code, _, err = run(["request", "approve", str(asked["id"])], portal)
    assert code == 1 and "permission_denied" in err  # a member decides nothing
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["request", "list", "--state", "pending"], admin)
    assert code == 0, err
    assert "vision-lab" in out and "gpu_type=a100" in out and "gpus=1" in out
    code, out, err = run(["request", "approve", str(asked["id"]), "--note", "good luck"], admin)
    assert code == 0, err
    assert "approved" in out and "good luck" in out
    code, _, err = run(["request", "deny", str(asked["id"])], admin)
    assert code == 1 and "request_decided" in err
    code, _, err = run(["request", "change", str(asked["id"]), "--why", "later"], portal)
    assert code == 1 and "request_decided" in err  # decided: the asker changes it no more
    code, _, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100"], portal)
    assert code == 0, err
