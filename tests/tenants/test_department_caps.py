"""A department's GPU cap over its projects together: per GPU type and in all (GPU-equivalents),
set through the API, the admin's page and audited; the portal's own admission refuses what would
take the department's projects past it; with Kueue, the department is a Cohort of its own whose
borrowing limit is the cap less its projects' quotas (tests/queueing/test_kueue_departments.py
runs it on the control plane)."""

from __future__ import annotations

import uuid
from fractions import Fraction

import pytest
from django.test import Client, TestCase

from audit.models import AuditRecord
from catalogue.models import GpuType, Template
from identity.models import User
from tenants.figures import DepartmentCaps
from tenants.kueue import COHORT, CohortSpec, FlavorSpec, department_cohort, make_department_cohort
from tenants.models import Department, Tenant
from tenants.queueing import cohort_spec, tenant_queue_objects
from tenants.services import department_create, quota_update, tenant_department_set, tenant_ensure
from tests.support.admission import admitted
from workloads.advice import fit_advice, launch_context
from workloads.services import DepartmentCapExceeded

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def project(name: str, *, a100: int = 4, v100: int = 4, total: int = 8) -> Tenant:
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=name)
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": total, "max_workloads": 20, "cpu": 64, "memory_gb": 256,
        "gpus_by_type": {"a100": a100, "v100": v100, "t4": 0}})
    return tenant


def department(*members: Tenant, gpu_cap: int | None = None, **by_type: int) -> Department:
    made = department_create(acting_user=None, fields={
        "name": f"Physics {uuid.uuid4().hex[:6]}", "gpu_cap": gpu_cap,
        "gpu_caps_by_type": by_type})
    for tenant in members:
        tenant_department_set(tenant=tenant, acting_user=None, department=made)
    return made


def launch(tenant: Tenant, owner: User, gpu_types, gpu: str = "a100", count: int = 1):
    return admitted(tenant, owner, Template.objects.get(slug="custom"), gpu_types[gpu],
                    image="busybox:1.36", gpu_count=count, kind="batch",
                    name=f"job-{uuid.uuid4().hex[:6]}")


def test_a_cap_of_a_type_bounds_the_departments_projects_together(gpu_types, owner, settings):
    settings.PORTAL_QUEUEING = "off"
    first, second = project("optics"), project("plasma")
    physics = department(first, second, a100=3)
    launch(first, owner, gpu_types, count=2)
    launch(second, owner, gpu_types)
    # the launch check says so before (the page's and POST workloads/check/'s advice)
    second.refresh_from_db()  # in the department now
    notes = fit_advice(launch_context(tenant=second, user=owner, gpu_type=gpu_types["a100"],
                                      gpus_per_node=1))
    assert ("warning", f"Beyond the department's cap: {physics.name}, the department of "
                       "plasma, holds 3 of its cap of 3 a100 GPUs; 1 more would exceed it.") \
        in notes
    with pytest.raises(DepartmentCapExceeded, match=r"holds 3 of its cap of 3 a100 GPUs; 1 more"):
        launch(second, owner, gpu_types)  # its own quota has room: the department's has not
    launch(second, owner, gpu_types, gpu="v100", count=4)  # no cap of that type
    # out of the department, the project is bound by its own quota only
    tenant_department_set(tenant=second, acting_user=None, department=None)
    launch(second, owner, gpu_types)
    assert physics.gpu_caps_by_type() == {"a100": 3}


def test_the_cap_in_all_counts_every_type(gpu_types, owner, settings):
    settings.PORTAL_QUEUEING = "off"
    first, second = project("optics"), project("plasma")
    department(first, second, gpu_cap=3)
    launch(first, owner, gpu_types, count=2)
    launch(second, owner, gpu_types, gpu="v100")
    with pytest.raises(DepartmentCapExceeded, match=r"holds 3 of its cap of 3 GPUs in all"):
        launch(second, owner, gpu_types, gpu="v100")


def test_with_kueue_only_what_the_department_could_never_hold_is_refused(gpu_types, owner,
                                                                        settings):
    """Queued launches wait for the Cohort: one within the cap queues whatever the department
    runs; one above both the cap and its projects' own quotas together can never start."""
    settings.PORTAL_QUEUEING = "kueue"
    first, second = project("optics", a100=2), project("plasma", a100=2)
    physics = department(first, second, a100=5)
    launch(first, owner, gpu_types, count=2)
    launch(second, owner, gpu_types, count=2)
    launch(second, owner, gpu_types, count=1)  # queued: within the cap
    # more than the quota of the project plus borrowing is its own rule; here 6 > the cap of 5
    quota_update(tenant=second, acting_user=None,
                 changes={"gpus_total": 16, "gpus_by_type": {"a100": 8}})
    second.refresh_from_db()
    notes = fit_advice(launch_context(tenant=second, user=owner, gpu_type=gpu_types["a100"],
                                      gpus_per_node=11))
    assert ("error", "Beyond the department's cap: " + (
        f"{physics.name}, the department of plasma, may hold at most 10 a100 GPUs together; 11 "
        "can never be admitted.")) in notes
    with pytest.raises(DepartmentCapExceeded, match="may hold at most 10 a100 GPUs together"):
        launch(second, owner, gpu_types, count=11)
    launch(second, owner, gpu_types, count=8)  # its own quota is its to use, cap or not


def test_a_cap_of_a_type_follows_the_cap_in_all_in_gpu_equivalents():
    caps = DepartmentCaps(name="Physics", gpus_total=3, gpus_by_type={"a100": 2},
                          fractions={"t4-quarter": Fraction(1, 4)})
    assert (caps.type_cap("a100"), caps.type_cap("v100"), caps.type_cap("t4-quarter")) == \
        (2, 3, 12)
    assert DepartmentCaps(name="Free", gpus_total=None, gpus_by_type={}).type_cap("a100") is None


def test_the_department_is_a_cohort_below_the_sites_whose_borrowing_is_its_cap_less_quotas(
        gpu_types):
    first, second = project("optics", a100=2), project("plasma", a100=2, v100=1)
    loner = project("loner")
    physics = department(first, second, a100=6, v100=1)
    flavors = [FlavorSpec(slug="a100", resource="nvidia.com/gpu", node_labels=()),
               FlavorSpec(slug="t4", resource="nvidia.com/gpu", node_labels=()),
               FlavorSpec(slug="v100", resource="nvidia.com/gpu", node_labels=())]
    assert cohort_spec(physics, flavors) == CohortSpec(
        name=department_cohort(physics.pk), borrowing=(("a100", 2), ("v100", 0)))
    physics.gpu_cap = 3  # in all: 3 a100 at most, fewer than their quotas of 4
    physics.save()
    assert dict(cohort_spec(physics, flavors).borrowing)["a100"] == 0
    cohort = make_department_cohort(CohortSpec(name="gpu-portal-department-7",
                                               borrowing=(("a100", 2),)), flavors)
    assert cohort == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
        "metadata": {"name": "gpu-portal-department-7",
                     "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {"parentName": COHORT, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "gpu-a100", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "2"}]}]}]}}
    uncapped = make_department_cohort(CohortSpec(name="c", borrowing=()), flavors)
    assert uncapped["spec"] == {"parentName": COHORT}
    first.refresh_from_db()
    objects = tenant_queue_objects(first, first.quota)
    assert [o["kind"] for o in objects] == ["Cohort", "ClusterQueue", "LocalQueue"]
    assert objects[1]["spec"]["cohortName"] == department_cohort(physics.pk)
    loner_queue = tenant_queue_objects(loner, loner.quota)[0]
    assert loner_queue["kind"] == "ClusterQueue" and loner_queue["spec"]["cohortName"] == COHORT


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        return getattr(client, method)(url, body, content_type="application/json")


def test_the_api_sets_caps_per_type_audited_and_refuses_unknown_types(gpu_types, keystone,
                                                                      project_token):
    admin = project_token("admin", "admin")
    made = call(admin, "post", "/api/v1/departments/",
                {"name": "Physics", "gpu_cap": 12, "gpu_caps_by_type": {"a100": 8}})
    assert made.status_code == 201, made.json()
    assert made.json()["gpu_caps_by_type"] == {"a100": 8}
    url = f"/api/v1/departments/{made.json()['id']}/"
    changed = call(admin, "patch", url, {"gpu_caps_by_type": {"v100": 2, "t4": 0}})
    assert changed.status_code == 200, changed.json()
    assert changed.json()["gpu_caps_by_type"] == {"t4": 0, "v100": 2}
    record = AuditRecord.objects.filter(action="department.update").get()
    assert (record.before["gpu_caps_by_type"], record.after["gpu_caps_by_type"]) == \
        ({"a100": 8}, {"t4": 0, "v100": 2})
    for bad in ({"h900": 1}, {"a100": -1}, {"a100": "many"}, ["a100"]):
        refused = call(admin, "patch", url, {"gpu_caps_by_type": bad})
        assert refused.status_code == 400, refused.json()
        assert "gpu_caps_by_type" in refused.json()["fields"]
    assert Department.objects.get().gpu_caps_by_type() == {"t4": 0, "v100": 2}
    refused = call(project_token("lead", "vision-lab"), "patch", url,
                   {"gpu_caps_by_type": {"a100": 99}})
    assert refused.status_code in (403, 404)


def test_the_admins_page_sets_the_caps(gpu_types, login):
    client = login("admin")
    physics = department(gpu_cap=4)
    page = client.get(f"/admin/departments/{physics.pk}/")
    assert page.status_code == 200 and b"A100" in page.content
    with TestCase.captureOnCommitCallbacks(execute=False):
        saved = client.post(f"/admin/departments/{physics.pk}/", {
            "name": physics.name, "gpu_cap": "", "cap_a100": "6", "cap_v100": ""})
    assert saved.status_code == 302, saved.content[:2000]
    physics.refresh_from_db()
    assert (physics.gpu_cap, physics.gpu_caps_by_type()) == (None, {"a100": 6})
    assert AuditRecord.objects.filter(action="department.update",
                                      after__gpu_caps_by_type={"a100": 6}).exists()
    refused = client.post(f"/admin/departments/{physics.pk}/", {
        "name": physics.name, "cap_a100": "-1"})
    assert refused.status_code == 400
    assert physics.gpu_caps_by_type() == {"a100": 6}


def test_the_department_shows_what_its_projects_use_against_its_caps(gpu_types, owner, settings,
                                                                      login, project_token):
    """Per GPU type in units, in all in GPU-equivalents (a quarter-T4 weighs a quarter), as the
    admission counts it: on the admin's page, in the API and so in `gpuctl department show`."""
    settings.PORTAL_QUEUEING = "off"
    GpuType.objects.filter(slug="t4").update(fraction_numerator=1, fraction_denominator=4)
    first, second = project("optics"), project("plasma")
    quota_update(tenant=second, acting_user=None,
                 changes={"gpus_by_type": {"a100": 4, "v100": 4, "t4": 4}})
    physics = department(first, second, gpu_cap=6, a100=3)
    launch(first, owner, gpu_types, count=2)
    launch(second, owner, gpu_types, gpu="t4", count=2)

    shown = call(project_token("admin", "admin"), "get", f"/api/v1/departments/{physics.pk}/")
    assert shown.status_code == 200, shown.json()
    use = shown.json()["use"]
    rows = {row["gpu_type"]: row for row in use["gpus_by_type"]}
    assert rows["a100"] == {"gpu_type": "a100", "used": 2, "quotas": 8, "cap": 3, "left": 1}
    assert rows["t4"] == {"gpu_type": "t4", "used": 2, "quotas": 4, "cap": 24, "left": 22}
    assert rows["v100"] == {"gpu_type": "v100", "used": 0, "quotas": 8, "cap": 6, "left": 6}
    assert use["gpus_total"] == {"used": 2.5, "used_text": "2.5", "quotas": 16, "cap": 6,
                                 "left": 3.5, "left_text": "3.5"}
    assert use["workloads"] == 2
    listed = call(project_token("admin", "admin"), "get", "/api/v1/departments/")
    assert "use" not in listed.json()["results"][0]  # read per department, not per list

    page = login("admin").get(f"/admin/departments/{physics.pk}/").content.decode()
    assert "2.5 GPU-equivalents by 2 active workloads" in page
    total = page[page.index('id="department-total"'):]
    assert ">2.5<" in total and ">3.5<" in total and ">16<" in total
