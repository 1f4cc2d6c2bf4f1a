"""Lifecycle tracking against kubesim over HTTP with the official client: reflectors feeding
one reconcile per workload, states and reasons, events, 410 relists, orphans, vanished
workloads, a request count per run that does not grow with the number of workloads, and the
long-lived command under its lease."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from io import StringIO

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from files.manifests import NAME as FILE_SERVER
from files.manifests import ClaimMount, FileServerSpec, file_server_objects
from kube.client import Kube
from kube.reflector import Reflector, object_key
from tenants.services import tenant_ensure
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.lifecycle import COMPLETE, job, pod, running, terminated
from tests.support.tracking import counting_kube, launch, make_tenant, state_of, track_until
from tests.support.waiting import eventually
from workloads.manifests import WorkloadSpec, workload_objects
from workloads.models import TrackerCursor, Workload, WorkloadEvent
from workloads.objects import workload_objects_create
from workloads.tracking.index import VANISHED
from workloads.tracking.states import vanished_since
from workloads.tracking.tracker import Lease, Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State
# 8 GPUs on the one 4-GPU T4 node: more than it has at all, so no eviction could help (the
# real kube-scheduler's wording, checked by tests/conformance)
UNFIT_8_T4 = (
    "0/9 nodes are available: 1 Insufficient nvidia.com/gpu, 8 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/9 nodes are available: 9 Preemption is not helpful for "
    "scheduling.")


def test_states_reasons_and_events_end_to_end(tenants, owner, gpu_types):
    """One tracker follows several workloads at once: the scheduler's message, an image pull
    error, a service with node and address, a batch job that succeeds and one that fails."""
    tenant = tenants()
    unfit = launch(tenant, owner, gpu_types, name="too big", gpu="t4", count=8)
    bad_image = launch(tenant, owner, gpu_types, name="bad image", image="nonexistent/x:nope")
    notebook = launch(tenant, owner, gpu_types, name="notebook", template="jupyter",
                      kind="service", max_runtime_minutes=60)
    ok = launch(tenant, owner, gpu_types, name="ok", gpu="v100",
                env={"KUBESIM_RUN_SECONDS": "1"})
    bad = launch(tenant, owner, gpu_types, name="bad", gpu="v100",
                 env={"KUBESIM_RUN_SECONDS": "1", "KUBESIM_EXIT_CODE": "3"})
    tracker = Tracker()

    def settled() -> bool:
        return (state_of(unfit).reason == UNFIT_8_T4
                and state_of(bad_image).reason.startswith(("ErrImagePull", "ImagePullBackOff"))
                and state_of(notebook).state == S.RUNNING and bool(notebook.address)
                and state_of(ok).state == S.SUCCEEDED and state_of(bad).state == S.FAILED)

    track_until(tracker, settled, timeout=30)

    assert unfit.state == S.PENDING
    assert bad_image.state == S.PENDING and "nonexistent/x:nope" in bad_image.reason
    assert notebook.node.startswith("gpu-a100-") and notebook.reason == ""
    assert notebook.url == f"http://{notebook.address}:8888/lab"  # the token never in a URL
    assert notebook.started_at is not None
    assert notebook.expires_at == notebook.started_at + dt.timedelta(minutes=60)
    assert ok.exit_code == 0 and ok.reason == "Completed." and ok.finished_at is not None
    assert ok.node.startswith("gpu-v100-")
    assert bad.exit_code == 3
    assert bad.reason == ("The container exited with code 3 (Error). "
                          "Job has reached the specified backoff limit.")
    # Kubernetes events became workload events, with the scheduler's and the kubelet's words
    assert WorkloadEvent.objects.filter(workload=unfit, reason="FailedScheduling",
                                        message=UNFIT_8_T4, source="default-scheduler").exists()
    assert WorkloadEvent.objects.filter(workload=bad_image, reason="Failed").exists()
    assert WorkloadEvent.objects.filter(workload=ok, reason="Completed").exists()
    assert WorkloadEvent.objects.filter(workload=notebook, reason="Running",
                                        source="tracker").exists()
    # the cursors hold where the watches left off
    assert set(TrackerCursor.objects.values_list("resource", flat=True)) == {
        "pods", "jobs", "deployments", "services", "ingresses", "events",
        "persistentvolumeclaims"}

    # events are recorded once, whatever relists happen: a fresh tracker (new process) and
    # this one forced to relist see the same events again
    before = set(WorkloadEvent.objects.filter(uid__isnull=False).values_list("uid", flat=True))
    snapshot = timezone.now()
    Tracker().run_for(0.5)
    TrackerCursor.objects.all().delete()  # the stored cursors no longer match: it relists
    assert tracker.run_for(0.5).lists == 7  # six kinds of workload objects, volumes' claims
    # nothing seen before is recorded again; a live cluster may add events meanwhile (a real
    # scheduler retries, an image pull backs off): those are new, from after the snapshot
    added = WorkloadEvent.objects.filter(uid__isnull=False).exclude(uid__in=before)
    assert all(event.at >= snapshot - dt.timedelta(seconds=2) for event in added), \
        [(e.reason, e.at, snapshot) for e in added]
    # and a final state is never left, whatever the objects say on a relist
    assert state_of(ok).state == S.SUCCEEDED and state_of(bad).state == S.FAILED


def test_quota_refusals_name_the_quota(tenants, owner, gpu_types):
    # Kubernetes' ResourceQuota allows 1 GPU; these ask for 2 (the portal's own admission is
    # bypassed here, as when an admin lowers a quota under running work)
    tenant = tenants(gpus=1, per_type=1)
    job = launch(tenant, owner, gpu_types, name="job", count=2)
    service = launch(tenant, owner, gpu_types, name="nb", template="jupyter", kind="service",
                     count=2)
    tracker = Tracker()
    track_until(tracker, lambda: "exceeded quota" in state_of(job).reason
                and "exceeded quota" in state_of(service).reason)
    for workload in (job, service):
        assert workload.state == S.PENDING
        assert workload.reason.startswith("The namespace quota refused its pod: pods ")
        assert "exceeded quota: gpu-portal-quota, requested: requests.nvidia.com/gpu=2" \
            in workload.reason
        assert WorkloadEvent.objects.filter(workload=workload, reason="FailedCreate").exists()


def test_orphans_are_deleted(tenants, owner, gpu_types):
    tenant = tenants()
    kube = Kube()
    # objects labelled with an id the database does not know
    spec = WorkloadSpec(workload_id=987654321, name="wl-987654321-ghost",
                        namespace=tenant.namespace, project_id=tenant.keystone_project_id,
                        owner="ghost", owner_id="ghost", template="custom", kind="batch",
                        image="busybox:1.36", gpu_count=0)
    for obj in workload_objects(spec):
        kube.create(obj)
    # objects of a workload that is stopped (the stop task died before deleting them)
    stopped = launch(tenant, owner, gpu_types, name="stopped", template="jupyter",
                     kind="service", count=0)
    Workload.objects.filter(pk=stopped.pk).update(state=S.STOPPED)
    # and a live workload, which must be left alone
    live = launch(tenant, owner, gpu_types, name="live", count=0)
    # and the project's file server: the portal's, but no workload's
    files = FileServerSpec(namespace=tenant.namespace, project_id=tenant.keystone_project_id,
                           claims=(ClaimMount("data"),), image="files:1", token="t",
                           run_as_user=1000, max_upload_bytes=1)
    for obj in file_server_objects(files):
        kube.create(obj)

    tracker = Tracker()
    tracker.run_for(1.0)
    assert tracker.stats.orphans == 3  # the Job, and the Deployment and Service
    gone = [("Job", spec.name), ("Deployment", stopped.object_name),
            ("Service", stopped.object_name), ("Secret", stopped.object_name)]
    for kind, name in gone:
        obj = kube.get(kind, name, tenant.namespace)
        assert obj is None or obj["metadata"].get("deletionTimestamp"), (kind, name)
    assert kube.get("Job", live.object_name, tenant.namespace) is not None
    for kind in ("Deployment", "Service", "Secret"):
        found = kube.get(kind, FILE_SERVER, tenant.namespace)
        assert found is not None and not found["metadata"].get("deletionTimestamp"), kind
    assert state_of(stopped).state == S.STOPPED


def test_vanished_workloads_fail_but_new_ones_do_not(tenants, owner, gpu_types):
    tenant = tenants()
    long = launch(tenant, owner, gpu_types, name="long", env={"KUBESIM_RUN_SECONDS": "600"})
    tracker = Tracker()
    track_until(tracker, lambda: state_of(long).state == S.RUNNING)

    # deleted behind the portal's back while watched: the DELETED event fails it
    Kube().delete("Job", long.object_name, tenant.namespace)
    track_until(tracker, lambda: state_of(long).state == S.FAILED)
    assert long.reason == VANISHED

    # found on a relist: pending since before the list, no objects
    lost = launch(tenant, owner, gpu_types, name="lost", create=False)
    Workload.objects.filter(pk=lost.pk).update(
        state=S.PENDING, updated_at=timezone.now() - dt.timedelta(minutes=2))
    # just marked pending, its objects not in the list yet (the create task's race): kept
    fresh = launch(tenant, owner, gpu_types, name="fresh", create=False)
    Workload.objects.filter(pk=fresh.pk).update(state=S.PENDING, updated_at=timezone.now())
    Tracker().run_for(0.5)
    assert state_of(lost).state == S.FAILED and lost.reason == VANISHED
    assert state_of(fresh).state == S.PENDING


def test_a_relist_of_one_kind_judges_only_that_kinds_workloads(tenants, owner, gpu_types):
    """A 410 relists one kind at a time. Relisting Deployments must not fail a batch workload
    launched since the Job view was last listed (its Job is simply not in that view yet): the
    real-cluster 410 test met this when Deployments expired before Jobs."""
    tenant = tenants()
    tracker = Tracker()
    tracker.run_for(0.2)  # the stores as they were before the launch (stopped: they stay so)
    job = launch(tenant, owner, gpu_types, name="since", env={"KUBESIM_RUN_SECONDS": "600"})
    service = launch(tenant, owner, gpu_types, name="svc", kind="service", create=False)
    earlier = timezone.now() - dt.timedelta(minutes=2)
    Workload.objects.filter(pk__in=[job.pk, service.pk]).update(state=S.PENDING,
                                                                 updated_at=earlier)
    tracker.sweep_vanished("Deployment", time.time())  # how a list of Deployments ends
    assert state_of(job).state == S.PENDING, job.reason
    # the service has no Deployment in the fresh Deployment list: it vanished
    assert state_of(service).state == S.FAILED and service.reason == VANISHED
    TrackerCursor.objects.filter(resource="jobs").delete()
    tracker.run_for(0.5)  # now the Jobs are listed again, and the Job is in them
    assert tracker.stats.lists == 1  # the Jobs only: the other kinds resumed
    assert state_of(job).state in (S.PENDING, S.RUNNING), job.reason


def test_a_list_judges_only_the_workloads_of_its_own_cluster(tenants, owner, gpu_types):
    """One tracker per cluster: the home cluster's list of Deployments says nothing of a
    service on another cluster (its Deployment is there, not here), and its reconcile leaves
    that one alone; the other cluster's tracker judges it."""
    tenant = tenants()
    elsewhere = launch(tenant, owner, gpu_types, name="east", kind="service", create=False)
    earlier = timezone.now() - dt.timedelta(minutes=2)
    Workload.objects.filter(pk=elsewhere.pk).update(state=S.RUNNING, updated_at=earlier,
                                                    cluster="east")
    tracker = Tracker()
    tracker.sweep_vanished("Deployment", time.time())
    tracker.reconcile(elsewhere.pk, tombstone={"kind": "Deployment"})
    assert state_of(elsewhere).state == S.RUNNING
    gone = vanished_since("Deployment", timezone.now(), lambda *_: False, cluster="east")
    assert [row["id"] for row in gone] == [elsewhere.pk]


def test_a_relist_of_pods_or_events_fails_no_workload(tenants, owner, gpu_types):
    """Every reflector's list ends with the tracker's sweep; only a list of a workload's own
    kind (Job, Deployment, JobSet, MPIJob) can show it vanished. A relist of pods after a
    cluster outage once failed every running batch workload as deleted outside the portal
    (the outage tests under load)."""
    tenant = tenants()
    job = launch(tenant, owner, gpu_types, name="running", env={"KUBESIM_RUN_SECONDS": "600"})
    tracker = Tracker()
    track_until(tracker, lambda: state_of(job).state == S.RUNNING)
    Workload.objects.filter(pk=job.pk).update(updated_at=timezone.now() - dt.timedelta(minutes=2))
    for kind in ("Pod", "Event", "Service", "Ingress"):
        tracker.sweep_vanished(kind, time.time())  # how a list of that kind ends
    assert state_of(job).state == S.RUNNING, job.reason
    with pytest.raises(ValueError, match="a list of Pod says nothing"):
        vanished_since("Pod", timezone.now(), lambda *_: False)


def test_a_stopping_workload_whose_objects_are_gone_is_stopped(tenants, owner, gpu_types):
    tenant = tenants()
    workload = launch(tenant, owner, gpu_types, name="stop me", create=False)
    Workload.objects.filter(pk=workload.pk).update(state=S.STOPPING, reason="stopped by lead")
    tracker = Tracker()
    # stopping with no objects: the tracker has no objects to derive from, so it leaves it
    tracker.run_for(0.5)
    assert state_of(workload).state == S.STOPPING
    # with objects that then go, the DELETED events finish the stop
    Workload.objects.filter(pk=workload.pk).update(state=S.CREATING)
    workload_objects_create(workload)
    Workload.objects.filter(pk=workload.pk).update(state=S.STOPPING)
    tracker.run_for(0.5)
    Kube().delete("Job", workload.object_name, tenant.namespace)
    track_until(tracker, lambda: state_of(workload).state == S.STOPPED)
    assert workload.reason == "stopped by lead"


def test_relist_after_410(kubesim_factory, settings, gpu_types, owner):
    """Watches that fell out of the server's history (410 Expired) relist and carry on."""
    small = kubesim_factory(inventory=DEMO_INVENTORY, extra_args=["--history-size", "20"])
    settings.KUBECONFIG = small.kubeconfig
    try:
        tenant = make_tenant()
        kube, calls = counting_kube(small)
        tracker = Tracker(kube)
        tracker.run_for(0.2)  # a list: the stores and the cursors are at the list's version
        listed = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
        # meanwhile far more than 20 changes happen: a batch job starts, secrets churn
        workload = launch(tenant, owner, gpu_types, name="after",
                          env={"KUBESIM_RUN_SECONDS": "1"})
        for i in range(30):
            kube.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": f"churn-{i}", "namespace": tenant.namespace}})
        calls.clear()
        stats = tracker.run_for(1.5)
        # every kind resumed from its stored version, got 410, relisted, watched again
        assert (stats.expired, stats.lists, stats.watches) == (7, 7, 14)
        assert stats.requests == len(calls) == 21
        track_until(tracker, lambda: state_of(workload).state == S.SUCCEEDED)
        now = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
        assert int(now["pods"]) > int(listed["pods"])
    finally:
        small.stop()


def test_requests_per_cycle_do_not_grow_with_workloads(tenants, owner, gpu_types, cluster):
    tenant = tenants()
    launch(tenant, owner, gpu_types, name="w0", gpu="t4", count=0)

    def one_cycle() -> tuple[int, list]:
        kube, calls = counting_kube(cluster)
        tracker = Tracker(kube)  # fresh stores: a list, then a watch, per kind
        stats = tracker.run_for(2.0)
        assert stats.requests == len(calls)
        relist_and_watch = len(calls)
        calls.clear()
        tracker.run_for(1.5)  # resume from the stored versions: watches only
        return relist_and_watch, list(calls)

    with_one, resumed_one = one_cycle()
    for i in range(1, 30):
        launch(tenant, owner, gpu_types, name=f"w{i}", gpu="t4", count=0)
    with_thirty, resumed_thirty = one_cycle()
    assert with_one == with_thirty == 14  # 7 lists + 7 watches
    assert len(resumed_one) == len(resumed_thirty) == 7
    assert {path for _, path in resumed_thirty} == {
        "api/v1/pods", "apis/batch/v1/jobs", "apis/apps/v1/deployments", "api/v1/services",
        "apis/networking.k8s.io/v1/ingresses", "api/v1/events",
        "api/v1/persistentvolumeclaims"}


def unschedulable(workload: Workload) -> bool:
    """The scheduler said why the workload's pod cannot be placed (its PodScheduled
    condition), and recorded it (the FailedScheduling event)."""
    kube = Kube()
    selector = f"gpu-portal.io/workload-id={workload.pk}"
    pods = kube.list("Pod", workload.tenant.namespace, label_selector=selector)["items"]
    said = any(c.get("reason") == "Unschedulable" for p in pods
               for c in (p.get("status") or {}).get("conditions") or ())
    events = kube.list("Event", workload.tenant.namespace)["items"]
    return said and any(e.get("reason") == "FailedScheduling" for e in events)


def test_the_command_leads_under_the_lease_and_a_standby_takes_over(tenants, owner, gpu_types):
    """`track_workloads` leads while it holds the lease (renewed while it leads: one term
    however long it runs), stands by while another holds it, and takes over once that one's
    lease lapses."""
    from django.core.management import call_command

    tenant = tenants()
    workload = launch(tenant, owner, gpu_types, name="cmd", gpu="t4", count=8)

    def command(*args: str) -> str:
        out = StringIO()
        call_command("track_workloads", *args, stdout=out)
        return out.getvalue()

    # the scheduler's verdict is in the cluster before the command starts: what the command
    # reads in its 4 s is then there to read, however slowly the scheduler came to it
    eventually(lambda: unschedulable(workload), timeout=30, message="its pod not judged yet")
    led = command("--duration", "4", "--lease", "1.5")
    assert led.count("tracker leading") == 1, led  # renewed: never lapsed and taken again
    assert "standing by" not in led
    assert state_of(workload).reason == UNFIT_8_T4
    assert Lease.holder() is None  # given up on the way out
    # another process holds the lease and renews it: this one stands by
    other = Lease(seconds=3)
    assert other.acquire()
    stood_by = command("--duration", "1")
    assert "standing by" in stood_by and "tracker leading" not in stood_by, stood_by
    # it stops renewing (it crashed): the lease lapses, and the standby takes over
    took_over = command("--duration", "6")
    assert took_over.index("standing by") < took_over.index("tracker leading"), took_over
    assert not other.renew()  # the old leader learns it lost the lease


def test_a_lease_is_held_while_renewed_and_lapses_when_not(db):
    leader, standby = Lease(seconds=1), Lease(seconds=1)
    assert leader.acquire() and not standby.acquire()
    for _ in range(3):  # renewed: held past its length
        time.sleep(0.5)
        assert leader.renew() and not standby.acquire()
    assert eventually(standby.acquire, timeout=5, interval=0.2)  # no longer renewed: lapsed
    assert not leader.renew()
    standby.release()
    assert Lease.holder() is None


def test_a_cluster_outage_is_logged_not_raised(kubesim_factory, settings, db):
    gone = kubesim_factory()
    settings.KUBECONFIG = gone.kubeconfig
    gone.stop()
    stats = Tracker().run_for(1)
    assert stats.failing == 7 and stats.lists == 0


def test_a_burst_of_changes_to_one_workload_costs_one_reconcile(gpu_types, owner):
    """The reflectors' callbacks only mark a workload dirty: N changes between two drains are
    one reconcile."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Burst Lab {uuid.uuid4().hex[:6]}")
    workload = launch(tenant, owner, gpu_types, create=False)
    Workload.objects.filter(pk=workload.pk).update(state=S.RUNNING)
    tracker = Tracker(kube=Kube())
    for phase in ("Pending", "Running", "Running", "Running", "Running"):
        seen(tracker, "Pod", ours(workload, tenant, pod(phase, state=running())))
    seen(tracker, "Job", ours(workload, tenant, job(COMPLETE,
                                                     completion="2025-05-01T10:01:06Z")))
    tracker.drain()
    assert tracker.stats.reconciles == 1
    assert state_of(workload).state == S.SUCCEEDED
    tracker.drain()  # nothing new: nothing derived
    assert tracker.stats.reconciles == 1


def test_a_drain_stores_only_the_cursors_that_moved(gpu_types, owner):
    """A leading tracker drains twice a second, busy or idle: each cursor written then took the
    database's write lock (on SQLite, every other writer of the portal waits for it), six
    times a drain. Only a cursor that moved is written, and those of one drain together."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex,
                           name=f"Cursor Lab {uuid.uuid4().hex[:6]}")
    workload = launch(tenant, owner, gpu_types, create=False)
    tracker = Tracker(kube=Kube())
    seen(tracker, "Pod", ours(workload, tenant, pod("Pending")))
    seen(tracker, "Job", ours(workload, tenant, job()))
    tracker.drain()
    assert dict(TrackerCursor.objects.values_list("resource", "resource_version")) == {
        "pods": "1", "jobs": "1"}

    def cursor_writes() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            tracker.drain()
        return [q["sql"] for q in queries.captured_queries
                if "trackercursor" in q["sql"].lower()
                and not q["sql"].lstrip().upper().startswith("SELECT")]

    assert cursor_writes() == []  # nothing moved: nothing written
    tracker.reflectors["Pod"].resource_version = "2"
    assert len(cursor_writes()) == 1  # the pods' cursor alone
    assert TrackerCursor.objects.get(resource="pods").resource_version == "2"
    assert cursor_writes() == []


def test_a_stream_of_changes_is_drained_at_most_once_a_gap(gpu_types, owner, monkeypatch):
    """A burst of launches brings a stream of changes; drained as each came, every drain took
    the database's write lock and reconciled the same workloads again. A change after a quiet
    spell is drained at once; one that comes within the gap waits for the gap's end."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex,
                           name=f"Gap Lab {uuid.uuid4().hex[:6]}")
    workload = launch(tenant, owner, gpu_types, create=False)
    tracker = Tracker(kube=Kube(), drain_gap_seconds=1.0)
    drains: list[float] = []
    drain = tracker.drain
    monkeypatch.setattr(tracker, "drain", lambda: (drains.append(time.monotonic()), drain()))
    began = time.monotonic()
    seen(tracker, "Pod", ours(workload, tenant, pod("Pending")))
    tracker.step(1.0)
    assert len(drains) == 1 and drains[0] - began < 0.5  # after a quiet spell: at once
    seen(tracker, "Pod", ours(workload, tenant, pod("Running", state=running())))
    tracker.step(2.0)
    # within the gap: at its end (measured from the first drain's start, a moment after the
    # gap began: not to the microsecond)
    assert len(drains) == 2 and drains[1] - drains[0] >= 0.9
    assert state_of(workload).state == Workload.State.RUNNING
    time.sleep(1.1)
    began = time.monotonic()
    seen(tracker, "Pod", ours(workload, tenant, pod("Running", state=running())))
    tracker.step(1.0)
    assert len(drains) == 3 and drains[2] - began < 0.5


def ours(workload: Workload, tenant, obj: dict) -> dict:
    """`obj` as one of the workload's objects."""
    obj["metadata"].update(name=workload.object_name, namespace=tenant.namespace,
                           labels={"gpu-portal.io/workload-id": str(workload.pk)})
    return obj


def seen(tracker: Tracker, kind: str, obj: dict) -> None:
    """The tracker's store of `kind` holds `obj` now, and the tracker is told (as its reflector
    does when a watch brings the object)."""
    before = tracker.reflectors.get(kind)
    items = before.store() if before is not None else {}
    items[object_key(obj)] = obj
    tracker.reflectors[kind] = Reflector(kind, kube=lambda: tracker.kube, resource_version="1",
                                         items=items)
    tracker._changed(kind, "MODIFIED", obj)


@pytest.mark.parametrize(("state", "kind", "finished_minutes_ago", "deleted", "orphan"), [
    (S.RUNNING, "service", None, False, False),
    (S.STOPPING, "service", None, False, False),  # the stop task is on it
    (S.STOPPED, "service", 0, False, True),
    (S.SUCCEEDED, "batch", 0, False, False),  # the Job's TTL removes it; logs stay readable
    (S.SUCCEEDED, "batch", 0, True, True),  # deleted by its owner
    (S.FAILED, "batch", 30, False, False),
    (S.FAILED, "service", 1, False, False),  # crashed: kept a while to read why
    (S.FAILED, "service", 30, False, True),  # then its GPUs are freed
])
def test_which_objects_are_orphans(state, kind, finished_minutes_ago, deleted, orphan):
    from workloads.tracking.orphans import _orphan_reason

    now = timezone.now()
    finished = None if finished_minutes_ago is None else now - dt.timedelta(
        minutes=finished_minutes_ago)
    row = {"state": state, "kind": kind, "finished_at": finished,
           "deleted_at": now if deleted else None, "tenant__namespace": "gpu-a"}
    grace = now - dt.timedelta(minutes=10)
    assert (_orphan_reason(row, "gpu-a", grace) is not None) == orphan
    assert _orphan_reason(row, "gpu-b", grace) is not None  # a copy in another namespace
    assert _orphan_reason(None, "gpu-a", grace) == "no workload with this id"


def test_a_row_moved_while_the_tracker_derived_it_is_derived_again(gpu_types, owner,
                                                                    monkeypatch):
    """The create task writes `pending` after the tracker read the row as `creating` but
    before it locked it: the tracker must derive again from `pending`, not give up. No later
    event would come: the pod was already running, so the workload would stay pending until
    the next relist."""
    from workloads import lifecycle
    from workloads.tracking import tracker as tracking

    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Race Lab {uuid.uuid4().hex[:6]}")
    workload = launch(tenant, owner, gpu_types, kind="service", template="jupyter",
                      create=False)
    Workload.objects.filter(pk=workload.pk).update(state=S.PENDING)  # the create task's write
    tracker = Tracker(kube=Kube())
    reads = []
    real_rows = tracking.workload_rows

    def rows_as_first_read(wids):
        rows = real_rows(wids)
        if not reads:  # the first read is from before the create task's write
            rows[workload.pk]["state"] = S.CREATING
        reads.append(sorted(rows))
        return rows

    monkeypatch.setattr(tracking, "workload_rows", rows_as_first_read)
    monkeypatch.setattr(tracking, "workload_outcome", lambda current, observed: lifecycle.Outcome(
        S.RUNNING, "", {"node": "gpu-a100-1", "address": "192.168.1.240"}))
    tracker.reconcile(workload.pk)
    assert reads == [[workload.pk], [workload.pk]]  # read again after the lost claim
    assert state_of(workload).state == S.RUNNING
    assert workload.node == "gpu-a100-1"


def test_a_job_decided_before_its_pods_exit_code_arrives_takes_it_after(gpu_types, owner):
    """A race once open: the Job's Complete condition (watch of jobs) is seen before
    its pod's terminated state with the exit code (watch of pods). The verdict is written
    without it; the pod's update, applied next, must still give the succeeded workload its
    exit code (a final state took no later facts: it stayed `succeeded`, exit code empty).
    Replayed through the tracker's own view, in that order, with the objects' real shapes."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Race Lab {uuid.uuid4().hex[:6]}")
    workload = launch(tenant, owner, gpu_types, create=False)
    Workload.objects.filter(pk=workload.pk).update(state=S.RUNNING)

    tracker = Tracker(kube=Kube())
    seen(tracker, "Pod", ours(workload, tenant, pod("Running", state=running())))
    seen(tracker, "Job", ours(workload, tenant, job(COMPLETE, completion="2025-05-01T10:01:06Z")))
    tracker.reconcile(workload.pk)  # the Job's event first: the pod still shows running
    assert (state_of(workload).state, workload.exit_code) == (S.SUCCEEDED, None)
    finished = workload.finished_at
    assert finished == dt.datetime(2025, 5, 1, 10, 1, 6, tzinfo=dt.UTC)

    seen(tracker, "Pod", ours(workload, tenant, pod("Succeeded", state=terminated(0))))
    tracker.reconcile(workload.pk)  # then the pod's
    assert (state_of(workload).state, workload.exit_code) == (S.SUCCEEDED, 0)
    assert workload.finished_at == finished and workload.reason == "Completed."
    assert list(workload.events.values_list("reason", flat=True)) == ["Succeeded"]
    # a fact it has is kept: a replayed or later pod does not rewrite it
    seen(tracker, "Pod", ours(workload, tenant, pod("Failed", state=terminated(3))))
    tracker.reconcile(workload.pk)
    assert (state_of(workload).state, workload.exit_code) == (S.SUCCEEDED, 0)
