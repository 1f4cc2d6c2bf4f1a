"""A department on the real control plane with Kueue: a Cohort of its own below the site's
cohort, its projects' ClusterQueues in it; they borrow from each other and from the rest of the
site no further than the department's cap; a request approved raises the project's
ClusterQueue and the department's Cohort, and the launch that waited runs (with the request's
refusals, every step audited).

The demo inventory has 16 A100s; an idle project outside the department holds 8 of them, so
what stops the department's projects is its cap, not the cluster or the site's quotas."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.test import Client, TestCase
from django.utils import timezone

from allocations.models import ResourceRequest
from allocations.services import requests_end
from audit.models import AuditRecord
from identity.models import User
from kube.client import Kube
from notifications.models import Kind, Notification
from tenants.kueue import COHORT, department_cohort
from tenants.models import Department, Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import (
    department_create,
    department_update,
    quota_update,
    tenant_department_set,
)
from tests.support.kueue import launch, make_tenant, nominal_a100
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State


@pytest.fixture
def owner(db):
    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def department_of(*tenants: Tenant, a100: int) -> Department:
    """A department capping A100s, the tenants in it, their queues reconciled (the tasks
    enqueued on commit, run here)."""
    department = department_create(acting_user=None, fields={
        "name": f"Physics {uuid.uuid4().hex[:6]}", "gpu_caps_by_type": {"a100": a100}})
    for tenant in tenants:
        tenant_department_set(tenant=tenant, acting_user=None, department=department)
        tenant_reconcile(tenant_id=tenant.pk)
    return department


def cohort_borrowing_a100(kube: Kube, department: Department) -> str:
    cohort = kube.get("Cohort", department_cohort(department.pk))
    assert cohort is not None and cohort["spec"]["parentName"] == COHORT
    flavor = cohort["spec"]["resourceGroups"][0]["flavors"][0]
    assert flavor["name"] == "gpu-a100"
    return str(flavor["resources"][0]["borrowingLimit"])


def waits_for_quota(kube: Kube, workload: Workload) -> bool:
    """Whether Kueue tried the workload and found no quota for it (not merely not yet seen)."""
    for item in kube.list("Workload", workload.tenant.namespace)["items"]:
        owners = [ref["name"] for ref in item["metadata"].get("ownerReferences", [])]
        if workload.object_name not in owners:
            continue
        for condition in item.get("status", {}).get("conditions", []):
            if condition["type"] == "QuotaReserved" and condition["status"] == "False" \
                    and "insufficient" in condition.get("message", ""):
                return True
    return False


def running(tracker: Tracker, workload: Workload) -> None:
    track_until(tracker, lambda: state_of(workload).state == S.RUNNING, timeout=60,
                describe=lambda: f"{workload.name}: {workload.state}: {workload.reason}")


def test_two_projects_of_a_department_borrow_from_each_other_and_not_beyond_its_cap(
        queued_cluster, kueue_cluster, owner, gpu_types):
    optics = make_tenant(queued_cluster, a100=2)
    plasma = make_tenant(queued_cluster, a100=2)
    make_tenant(queued_cluster, a100=8)  # outside the department, idle: lends what it may
    physics = department_of(optics, plasma, a100=5)
    kube = Kube()
    assert kube.get("ClusterQueue", optics.namespace)["spec"]["cohortName"] == \
        department_cohort(physics.pk)
    assert cohort_borrowing_a100(kube, physics) == "1"  # the cap of 5 less their quotas of 4
    again = Kube()  # in shape: a second reconcile writes nothing, the Cohort included
    assert not tenant_reconcile(tenant_id=plasma.pk, kube=again).changed
    assert again.writes == 0
    tracker = Tracker()
    # optics takes its own 2, then plasma's idle 2, then 1 of the site's: 5, the cap
    for name, gpus in (("own", 2), ("plasmas", 2), ("sites", 1)):
        running(tracker, launch(optics, owner, gpu_types, name=name, gpus=gpus))
    # the sixth waits, though the project outside has 8 idle: the department is at its cap
    sixth = launch(optics, owner, gpu_types, name="sixth", gpus=1)
    eventually(lambda: waits_for_quota(kube, sixth), timeout=60,
               message="Kueue did not find the sixth GPU beyond the department's cap")
    tracker.run_for(1.0)
    assert state_of(sixth).state == S.QUEUED
    # raising the cap lets the sixth in, through the Cohort alone
    department_update(department=physics, acting_user=None, changes={
        "gpu_caps_by_type": {"a100": 6}})
    tenant_reconcile(tenant_id=optics.pk)  # what the update enqueued, run here
    assert cohort_borrowing_a100(kube, physics) == "2"
    running(tracker, sixth)
    assert AuditRecord.objects.filter(action="department.update",
                                      after__gpu_caps_by_type={"a100": 6}).exists()


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method == "get":
            return client.get(url)
        return getattr(client, method)(url, body or {}, content_type="application/json")


def test_a_request_approved_raises_the_queue_and_the_cohort_and_the_queued_launch_runs(
        queued_cluster, kueue_cluster, owner, gpu_types, login, project_token):
    for who in ("researcher", "lead", "viewer", "student"):
        login(who)
    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes={
        "gpus_total": 16, "max_workloads": 10, "cpu": 64, "memory_gb": 256,
        "gpus_by_type": {"a100": 2, "v100": 0, "t4": 0}, "gpu_borrowing_limit": 0})
    tenant_reconcile(tenant_id=vision.pk)
    vision.refresh_from_db()
    queued_cluster.append(vision)
    neighbour = make_tenant(queued_cluster, a100=2)
    physics = department_of(vision, neighbour, a100=8)
    # vision-lab's managers are the department's admins too: lead may decide its requests,
    # but not their own
    Department.objects.filter(pk=physics.pk).update(keystone_project_id=vision.keystone_project_id)
    kube = Kube()
    assert cohort_borrowing_a100(kube, physics) == "4"
    tracker = Tracker()
    running(tracker, launch(vision, owner, gpu_types, name="first", gpus=2))
    waiting = launch(vision, owner, gpu_types, name="waiting", gpus=2)
    eventually(lambda: waits_for_quota(kube, waiting), timeout=60,
               message="Kueue did not hold the second launch at the project's quota")

    # the refusals: a reader cannot ask; another project's people see a 404; nobody, a
    # manager and department admin neither, approves their own request
    more = {"kind": "quota", "details": {"gpu_type": "a100", "gpus": 2},
            "justification": "the second run of a paper's experiments"}
    assert call(project_token("viewer", "vision-lab"), "post", "/api/v1/requests/",
                more).status_code == 403
    lead = project_token("lead", "vision-lab")
    own = call(lead, "post", "/api/v1/requests/", more).json()
    refused = call(lead, "post", f"/api/v1/requests/{own['id']}/approve/")
    assert refused.status_code == 403 and refused.json()["code"] == "own_request"
    assert call(project_token("admin", "admin"), "post", f"/api/v1/requests/{own['id']}/deny/",
                {"note": "one request at a time"}).status_code == 200
    # for a deadline: the grant ends by itself
    ends_at = timezone.now() + dt.timedelta(days=14)
    asked = call(project_token("researcher", "vision-lab"), "post", "/api/v1/requests/",
                 {**more, "ends_at": ends_at.isoformat()})
    assert asked.status_code == 201, asked.json()
    url = f"/api/v1/requests/{asked.json()['id']}/"
    assert call(project_token("student", "nlp-lab"), "get", url).status_code == 404
    assert call(project_token("student", "nlp-lab"), "post", url + "approve/").status_code \
        == 404

    approved = call(project_token("admin", "admin"), "post", url + "approve/",
                    {"note": "granted"})
    assert approved.status_code == 200, approved.json()
    tenant_reconcile(tenant_id=vision.pk)  # what the quota's change enqueued, run here
    assert nominal_a100(kube, vision) == "4"
    assert cohort_borrowing_a100(kube, physics) == "2"  # the cap of 8 less quotas of 6 now
    running(tracker, waiting)
    request_id = asked.json()["id"]
    assert ResourceRequest.objects.get(pk=request_id).state == ResourceRequest.State.APPROVED
    actions = set(AuditRecord.objects.filter(tenant=vision).values_list("action", flat=True))
    assert {"request.create", "request.deny", "request.approve", "quota.update",
            "namespace.reconcile"} <= actions
    researcher = ResourceRequest.objects.get(pk=request_id).asker
    told = set(Notification.objects.filter(user=researcher, kind=Kind.REQUEST)
               .values_list("key", flat=True))
    assert {f"request:{request_id}:asked", f"request:{request_id}:approved"} <= told, told

    # its end: the beat takes the grant back, the queue and the cohort are as before, told
    with time_machine.travel(ends_at + dt.timedelta(minutes=1), tick=False):
        assert requests_end() == [request_id]
        tenant_reconcile(tenant_id=vision.pk)
    assert nominal_a100(kube, vision) == "2"
    assert cohort_borrowing_a100(kube, physics) == "4"
    assert ResourceRequest.objects.get(pk=request_id).state == ResourceRequest.State.ENDED
    assert Notification.objects.filter(user=researcher, kind=Kind.REQUEST,
                                       key=f"request:{request_id}:ended").exists()
