"""Queueing on the real control plane with Kueue (stack/k8s/kueue.py): the quotas as Kueue
objects, a borrowing tenant preempted, warned and requeued when the lender needs its GPUs, the
queue's place and start estimate, a launch that can never be admitted, and Kueue down.

The demo inventory has 16 A100s (two nodes of 8); the tenants here hold 4 each, so what one
borrows is the other's idle quota (Kueue lends within the cohort's nominal quotas, not the
cluster's size)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.cache import cache

from audit.models import AuditRecord
from catalogue.models import Template
from kube.client import Kube, KubeUnavailable
from kube.labels import QUEUE_LABEL
from notifications.models import Notification
from stack.k8s.addons import addon
from tenants.kueue import COHORT, LOCAL_QUEUE
from tenants.models import Quota
from tenants.provisioning import tenant_reconcile
from tests.support.kueue import launch, make_tenant
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.api.serializers import WorkloadSerializer
from workloads.kueue_reason import from_event
from workloads.models import Workload
from workloads.queue import annotate_queue
from workloads.services import AdmissionRefused, workload_launch
from workloads.tasks import workload_create_task, workload_queued_notice_task
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State


@pytest.fixture
def owner(db):
    from identity.models import User

    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def test_quotas_become_a_cluster_queue_per_tenant_in_one_cohort(queued_cluster, kueue_cluster):
    tenant = make_tenant(queued_cluster, a100=4, borrowing=2)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        queue = kube.get("ClusterQueue", tenant.namespace)
        assert queue["spec"]["cohortName"] == COHORT
        gpus = queue["spec"]["resourceGroups"][1]["flavors"]
        a100 = next(f for f in gpus if f["name"] == "gpu-a100")["resources"][0]
        assert (a100["nominalQuota"], a100["borrowingLimit"]) == ("4", "2")
        local = kube.get("LocalQueue", LOCAL_QUEUE, tenant.namespace)
        assert local["spec"]["clusterQueue"] == tenant.namespace
        assert kube.get("ResourceFlavor", "gpu-a100")["spec"]["nodeLabels"] == \
            gpu_types_labels()
        # Kueue is the quota of GPUs: the namespace's ResourceQuota keeps only the counts
        hard = kube.get("ResourceQuota", "gpu-portal-quota", tenant.namespace)["spec"]["hard"]
        assert "requests.nvidia.com/gpu" not in hard and "pods" in hard
    # in shape: a second reconcile writes nothing
    again = Kube()
    assert not tenant_reconcile(tenant_id=tenant.pk, kube=again).changed
    assert again.writes == 0


def gpu_types_labels() -> dict:
    from catalogue.models import GpuType

    return GpuType.objects.get(slug="a100").node_selector


def test_a_borrower_is_preempted_warned_requeued_and_finishes(queued_cluster, owner,
                                                              gpu_types):
    lender = make_tenant(queued_cluster, a100=4)
    borrower = make_tenant(queued_cluster, a100=4)
    tracker = Tracker()
    big = launch(borrower, owner, gpu_types, name="big", gpus=8, run_seconds=12)
    assert big.state == S.QUEUED
    track_until(tracker, lambda: state_of(big).state == S.RUNNING, timeout=60,
                describe=lambda: f"{big.state}: {big.reason}")
    # the lender wants its own 4 GPUs back: Kueue preempts the borrower
    own = launch(lender, owner, gpu_types, name="own", gpus=4, run_seconds=3)
    track_until(tracker, lambda: state_of(big).state == S.QUEUED, timeout=60,
                describe=lambda: f"{big.state}: {big.reason}")
    assert big.events.filter(reason="Preempted", type="Warning").exists()
    # Kueue's own event says by what priority, without the lender's queue or path
    # (the lender's run is short: by now it may hold GPUs again, so read the event itself)
    kueue_said = big.events.filter(reason="Preempted", source__icontains="kueue")
    track_until(tracker, kueue_said.exists, timeout=30,
                describe=lambda: str(list(big.events.values_list("reason", "source"))))
    message = kueue_said.get().message
    assert lender.namespace not in message and "preemptor path" not in message
    why = from_event("Preempted", message)
    assert why is not None
    assert why.reason.startswith("Preempted: the GPUs it borrowed were taken back for a "
                                 "workload (priority 100) of the project that lent them")
    assert AuditRecord.objects.filter(action="workload.reclaim", target=big.object_name).exists()
    track_until(tracker, lambda: state_of(own).state == S.SUCCEEDED, timeout=60,
                describe=lambda: f"{own.state}: {own.reason}")
    # requeued, not lost: it runs again once the GPUs are free, and finishes
    track_until(tracker, lambda: state_of(big).state == S.SUCCEEDED, timeout=90,
                describe=lambda: f"{big.state}: {big.reason}")
    # its owner heard each step once: running, preempted, running again, finished; not
    # "queued" (admitted on borrowed GPUs within seconds, before its queued notice was due,
    # which then says nothing)
    workload_queued_notice_task(big.pk, state_of(big).launch_attempts)
    assert list(Notification.objects.filter(workload_id=big.pk).order_by("id")
                .values_list("kind", flat=True)) == ["started", "reclaim", "started",
                                                     "finished"]


def test_queue_place_and_estimate_and_a_launch_that_can_never_be_admitted(
        queued_cluster, owner, gpu_types):
    tenant = make_tenant(queued_cluster, a100=2, borrowing=0)
    tracker = Tracker()
    first = launch(tenant, owner, gpu_types, name="first", gpus=2, max_runtime=30)
    track_until(tracker, lambda: state_of(first).state == S.RUNNING, timeout=60,
                describe=lambda: f"{first.state}: {first.reason}")
    second = launch(tenant, owner, gpu_types, name="second", gpus=2, max_runtime=10)
    tracker.run_for(1.0)
    assert state_of(second).state == S.QUEUED

    def listed() -> dict:
        # asked afresh each time: Kueue lists the Job's Workload a moment after it is made
        cache.delete(f"queueing:pending:{tenant.namespace}")
        found = WorkloadSerializer(second).data
        return found if found["queue_position"] is not None else {}

    data = eventually(listed, timeout=30, message="Kueue does not list the second launch")
    assert (data["queue_position"], data["queue_length"]) == (1, 1)
    assert data["eta_basis"] == "from maximum runtimes"
    first.refresh_from_db()
    assert data["eta"] == first.expires_at.isoformat()  # the GPUs come back at its limit
    annotate_queue([second])
    assert second.queue_text.startswith("queued — position 1 of 1 for a100, about ")
    # why: Kueue's Pending event on its Workload, recorded by the tracker, says it in words
    track_until(tracker, lambda: second.events.filter(reason="Pending",
                                                      source__icontains="kueue").exists(),
                timeout=30, describe=lambda: str(list(second.events.values_list(
                    "reason", "source", "message"))))
    pending = second.events.filter(reason="Pending", source__icontains="kueue").order_by(
        "at", "pk").last()
    assert pending is not None
    data = WorkloadSerializer(second).data
    assert "gpu-a100" in data["queue_kueue_message"]
    assert data["queue_kueue_message"] == pending.message
    assert data["queue_reason"].startswith(("Waiting for 2 more a100", "Waiting: borrowing more"))
    assert tenant.namespace not in data["queue_reason"]
    # more than its quota with no borrowing: it could never be admitted, so it is refused
    with pytest.raises(AdmissionRefused, match="can never be admitted"):
        launch(tenant, owner, gpu_types, name="too big", gpus=3)
    assert Quota.objects.get(tenant=tenant).gpu_borrowing_limit == 0


def test_kueue_down_a_launch_waits_creating_and_goes_on_when_it_is_back(
        queued_cluster, owner, gpu_types, kueue_cluster):
    tenant = make_tenant(queued_cluster, a100=2)
    kueue = addon(kueue_cluster, "kueue")
    kueue.stop_process()
    try:
        request_workload = None
        with pytest.raises(KubeUnavailable):
            request_workload = launch(tenant, owner, gpu_types, name="during", gpus=1)
        workload = Workload.objects.get(tenant=tenant, name="during")
        assert request_workload is None
        assert workload.state == S.CREATING
        assert "Waiting for the cluster" in workload.reason and "webhook" in workload.reason
    finally:
        kueue.start_process()
    workload_create_task(workload.pk)  # the task's next try
    assert state_of(workload).state == S.QUEUED
    with kueue_cluster.api_client() as client:
        jobs = Kube(client).list("Job", tenant.namespace)["items"]
    assert [j["metadata"]["name"] for j in jobs] == [workload.object_name]  # once, not twice
    assert jobs[0]["metadata"]["labels"][QUEUE_LABEL] == LOCAL_QUEUE


def test_a_service_waits_gated_ahead_of_batch_and_starts_when_gpus_are_free(
        queued_cluster, owner, gpu_types, kueue_cluster):
    from workloads.services import workload_stop
    from workloads.tasks import workload_stop_task

    tenant = make_tenant(queued_cluster, a100=1, borrowing=0)
    tracker = Tracker()
    job = launch(tenant, owner, gpu_types, name="holder", gpus=1)
    track_until(tracker, lambda: state_of(job).state == S.RUNNING, timeout=60,
                describe=lambda: f"{job.state}: {job.reason}")
    # a batch job queues first; the notebook after it still goes ahead: services rank above
    # batch (WorkloadPriorityClass)
    batch = launch(tenant, owner, gpu_types, name="batch", gpus=1)
    jupyter = Template.objects.get(slug="jupyter")
    request = {"template": jupyter, "name": "notebook", "kind": "service",
               "gpu_type": gpu_types["a100"], "gpu_count": 1, "image": jupyter.image,
               "port": jupyter.port, "cpu": 1, "memory": 1}
    notebook, _ = workload_launch(tenant=tenant, user=owner, request=request)
    workload_create_task(notebook.pk)
    assert state_of(notebook).state == S.QUEUED

    def gates() -> list[str]:
        with kueue_cluster.api_client() as client:
            pods = Kube(client).list("Pod", tenant.namespace,
                                     label_selector=f"gpu-portal.io/workload-id={notebook.pk}")
        return [g["name"] for p in pods["items"] for g in p["spec"].get("schedulingGates") or []]

    # its pod comes, held by Kueue's gate; the tracker keeps it queued all along
    track_until(tracker, lambda: bool(gates()), timeout=30)
    assert state_of(notebook).state == S.QUEUED, notebook.reason

    # Kueue creates the notebook pod's Workload a moment after the gate is set: wait until its
    # visibility API lists both (asked afresh each time, past the portal's few-second memory)
    def places() -> list[int | None]:
        cache.delete(f"queueing:pending:{tenant.namespace}")
        found = [WorkloadSerializer(w).data["queue_position"] for w in (notebook, batch)]
        return found if None not in found else []

    assert eventually(places, timeout=30, message="Kueue does not list both") == [1, 2]
    # still waiting when its notice comes (PORTAL_QUEUED_NOTICE_SECONDS after its objects): the
    # launch's owner is told it waits, once, with where it stands
    assert not Notification.objects.filter(workload_id=notebook.pk, kind="queued").exists()
    workload_queued_notice_task(notebook.pk, state_of(notebook).launch_attempts)
    queued, = Notification.objects.filter(workload_id=notebook.pk, kind="queued")
    assert "waits for 1× a100: queued" in queued.text
    # the GPU comes back: the notebook is admitted, the batch job waits on
    workload_stop(workload=job, user=owner)
    workload_stop_task(job.pk)
    track_until(tracker, lambda: state_of(notebook).state == S.RUNNING, timeout=60,
                describe=lambda: f"{notebook.state}: {notebook.reason}")
    assert state_of(batch).state == S.QUEUED


def test_borrowed_gpus_are_shared_by_the_tenants_weights(queued_cluster, kueue_cluster, owner,
                                                         gpu_types, login):
    """A lender's 8 idle A100s, two borrowers with nothing of their own queueing 8 one-GPU jobs
    each: Kueue's fair sharing admits them so that each one's borrowing over its weight stays
    even, 3 : 1 for weights 3 and 1. The queues are made with their weights, and the launches
    wait until Kueue has taken all three (a weight changed a moment before the launches, or a
    queue Kueue has not seen yet, let some be admitted on the old shares: 3 : 5, seen once
    under load)."""
    lender = make_tenant(queued_cluster, a100=8)  # idle
    light = make_tenant(queued_cluster, a100=0)
    heavy = make_tenant(queued_cluster, a100=0, weight="3")
    with kueue_cluster.api_client() as client:
        kube = Kube(client)

        def active(tenant) -> bool:
            conditions = (kube.get("ClusterQueue", tenant.namespace).get("status") or {}) \
                .get("conditions") or []
            return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

        eventually(lambda: all(active(t) for t in (lender, light, heavy)), timeout=30,
                   message="Kueue has not taken the three queues")
    tracker = Tracker()
    for i in range(8):  # interleaved, the light one first each time
        for tenant in (light, heavy):
            launch(tenant, owner, gpu_types, name=f"job-{i}", gpus=1)
    tracker.run_for(1.0)

    def running() -> tuple[int, int]:
        return tuple(Workload.objects.filter(tenant=t, state=S.RUNNING).count()
                     for t in (light, heavy))

    track_until(tracker, lambda: sum(running()) == 8, timeout=60,
                describe=lambda: f"running {running()}")
    assert running() == (2, 6)
    # the rest wait, each with its place (Kueue orders them as it created their Workloads,
    # which for launches of the same moment need not be the launch order)
    waiting = Workload.objects.filter(tenant=light, state=S.QUEUED)
    places = [WorkloadSerializer(w).data["queue_position"] for w in waiting]
    assert sorted(places) == list(range(1, 7))
    # the admins' queue page: per project, quota, in use, borrowed; what waits
    admin = login("admin")

    def queue_page() -> tuple[str, list[tuple[str, ...]]]:
        page = admin.get("/admin/queues/").content.decode()
        rows = re.findall(r"<tr><td>(team-\d)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>"
                          r"<td>(\d+)</td><td>(\d+) \((\d+) GPUs\)</td>", page)
        assert ("team-2", "0", "6", "6", "0", "2", "2") in rows, rows
        return page, rows

    # Kueue writes its queues' usage a moment after it admits
    page, rows = eventually(queue_page, timeout=15, interval=0.5,
                            message="the queue page does not show team-2's usage")
    assert "Queueing is on" in page
    assert ("team-0", "8", "0", "0", "8", "0", "0") in rows, rows  # the lender: idle, lent
    assert ("team-1", "0", "2", "2", "0", "6", "6") in rows, rows
    assert ("team-2", "0", "6", "6", "0", "2", "2") in rows, rows
