"""Maintenance windows on the real control plane with Kueue (the portal as its ServiceAccount,
deploy/base/portal-rbac.yaml): a crossing launch is placed off the window's node by its pod's
affinity and the real scheduler puts it on the other one, or refused when no other node can
hold it; the owners are told at the announcement, 24 h and 1 h ahead; at the start the nodes
are cordoned and the batch jobs on them put back in line (stopped, and a copy submitted that
waits while every node of its type is cordoned; a drain killed midway resumes without stopping
or copying anything twice); at the end the nodes are uncordoned and the copies run. The portal's
clock is moved with time-machine; Kubernetes keeps its own."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import TestCase
from django.utils import timezone

from audit.models import AuditRecord
from calendars import maintenance
from calendars.admission import MaintenanceWindowRefused
from calendars.maintenance import windows_advance
from calendars.models import MaintenanceWindow
from calendars.services import window_create
from calendars.validation import window_clean
from kube.client import Kube
from kube.labels import CORDON_ANNOTATION, LABEL_WORKLOAD_ID
from notifications.models import Kind, Notification
from tests.support.kueue import launch, make_tenant, queued_cluster  # noqa: F401 - a fixture
from tests.support.tracking import owner, state_of, track_until  # noqa: F401 - a fixture
from workloads.models import Workload
from workloads.tasks import workload_create_task, workload_stop_task
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]
S = Workload.State
A100_NODES = ("gpu-a100-1", "gpu-a100-2")


def announce(**data) -> MaintenanceWindow:
    data = {"reason": "driver update", "drain": False, **data}
    for key in ("start", "end"):
        data[key] = data[key].isoformat()
    with TestCase.captureOnCommitCallbacks(execute=True):
        return window_create(acting_user=None, fields=window_clean(data))


def pod_nodes(admin: Kube, workload) -> list[str]:
    return [p["spec"].get("nodeName", "") for p in admin.list(
        "Pod", workload.tenant.namespace,
        label_selector=f"{LABEL_WORKLOAD_ID}={workload.pk}")["items"]]


def test_a_crossing_launch_is_redirected_or_refused(queued_cluster, kueue_cluster, owner,
                                                     gpu_types, eager_celery):
    tenant = make_tenant(queued_cluster, a100=16)
    now = timezone.now()
    announce(nodes=["gpu-a100-1"], start=now + dt.timedelta(hours=2),
             end=now + dt.timedelta(hours=6))
    tracker = Tracker()
    job = launch(tenant, owner, gpu_types, name="crossing", gpus=4, max_runtime=180)
    assert job.launch_spec["avoid_nodes"] == ["gpu-a100-1"]
    track_until(tracker, lambda: state_of(job).state == S.RUNNING, timeout=60,
                describe=lambda: f"{job.state}: {job.reason}")
    with kueue_cluster.api_client() as client:
        assert pod_nodes(Kube(client), job) == ["gpu-a100-2"]  # the real scheduler kept off
    # every a100 node in a window: a launch with no limit cannot run anywhere
    announce(gpu_type="a100", start=now + dt.timedelta(hours=2), end=now + dt.timedelta(hours=6))
    with pytest.raises(MaintenanceWindowRefused, match="launch after"):
        launch(tenant, owner, gpu_types, name="refused", gpus=2)


def test_notices_then_cordon_drain_killed_midway_resumed_and_uncordon(
        queued_cluster, kueue_cluster, owner, gpu_types, eager_celery, monkeypatch):
    tenant = make_tenant(queued_cluster, a100=16)
    tracker = Tracker()
    jobs = [launch(tenant, owner, gpu_types, name=f"long-{i}", gpus=4, run_seconds=3600)
            for i in range(2)]
    for job in jobs:
        track_until(tracker, lambda job=job: state_of(job).state == S.RUNNING, timeout=60,
                    describe=lambda job=job: f"{job.state}: {job.reason}")
    start = timezone.now().replace(microsecond=0) + dt.timedelta(hours=30)
    window = announce(gpu_type="a100", drain=True, start=start, end=start + dt.timedelta(hours=4))

    def keys(notice: str) -> list[str]:
        return sorted(Notification.objects.filter(kind=Kind.MAINTENANCE,
                                                  key__contains=f":{notice}:")
                      .values_list("key", flat=True))

    assert keys("announced") == sorted(f"maintenance:{window.pk}:announced:{j.pk}" for j in jobs)
    with time_machine.travel(start - dt.timedelta(hours=23), tick=True):
        windows_advance()
        windows_advance()
    assert len(keys("24h")) == 2
    with time_machine.travel(start - dt.timedelta(minutes=30), tick=True):
        windows_advance()
    assert len(keys("1h")) == 2

    real_requeue = maintenance.workload_requeue
    requeued_by_first_run = []

    def killed_after_one(**kwargs):
        if requeued_by_first_run:
            raise SystemExit("worker killed mid-drain")
        requeued_by_first_run.append(kwargs["workload"].pk)
        return real_requeue(**kwargs)

    with kueue_cluster.api_client() as client:
        admin = Kube(client)
        with time_machine.travel(start + dt.timedelta(seconds=5), tick=True):
            monkeypatch.setattr(maintenance, "workload_requeue", killed_after_one)
            with TestCase.captureOnCommitCallbacks(execute=False), pytest.raises(SystemExit):
                windows_advance()
            monkeypatch.setattr(maintenance, "workload_requeue", real_requeue)
            with TestCase.captureOnCommitCallbacks(execute=False):
                windows_advance()  # the restarted worker
                windows_advance()
        window.refresh_from_db()
        used = {node for job in jobs for node in pod_nodes(admin, job)}
        assert set(window.cordoned) == set(A100_NODES)
        for name in A100_NODES:
            node = admin.get("Node", name)
            assert node["spec"]["unschedulable"] is True
            assert node["metadata"]["annotations"][CORDON_ANNOTATION] == \
                f"maintenance-{window.pk}"
        assert used <= set(A100_NODES) and used
        assert [state_of(job).state for job in jobs] == [S.STOPPING, S.STOPPING]
        assert f"maintenance #{window.pk}" in state_of(jobs[0]).reason
        stops = AuditRecord.objects.filter(action="workload.stop").values_list("target",
                                                                               flat=True)
        assert sorted(stops) == sorted(job.object_name for job in jobs)  # once each
        assert sorted(AuditRecord.objects.filter(action="node.cordon")
                      .values_list("target", flat=True)) == list(A100_NODES)
        copies = [Workload.objects.get(idempotency_key=f"requeue-of-{job.pk}") for job in jobs]
        assert AuditRecord.objects.filter(action="workload.requeue").count() == 2
        for job, copy in zip(jobs, copies, strict=True):
            assert f"put back in line as #{copy.pk}" in state_of(job).reason
            assert copy.launch_spec["avoid_nodes"] == []  # no other a100 node: later
            workload_stop_task(job.pk)
            track_until(tracker, lambda job=job: state_of(job).state == S.STOPPED, timeout=60,
                        describe=lambda job=job: f"{job.state}: {job.reason}")
        for copy in copies:  # submitted while both a100 nodes are cordoned: they wait
            workload_create_task(copy.pk)
            track_until(tracker, lambda copy=copy: state_of(copy).state in (S.PENDING, S.QUEUED),
                        timeout=60, describe=lambda copy=copy: f"{copy.state}: {copy.reason}")
            assert not any(pod_nodes(admin, copy))

        with time_machine.travel(window.end + dt.timedelta(seconds=5), tick=True):
            windows_advance()
            windows_advance()
        window.refresh_from_db()
        assert window.state == MaintenanceWindow.State.ENDED
        for name in A100_NODES:
            node = admin.get("Node", name)
            assert not node["spec"].get("unschedulable")
            assert CORDON_ANNOTATION not in (node["metadata"].get("annotations") or {})
        assert sorted(AuditRecord.objects.filter(action="node.uncordon")
                      .values_list("target", flat=True)) == list(A100_NODES)
        for copy in copies:  # the nodes are back: the copies run on them
            track_until(tracker, lambda copy=copy: state_of(copy).state == S.RUNNING,
                        timeout=90, describe=lambda copy=copy: f"{copy.state}: {copy.reason}")
            assert set(pod_nodes(admin, copy)) <= set(A100_NODES)


def test_kueue_admits_only_what_the_nodes_left_in_service_hold(queued_cluster, kueue_cluster,
                                                               owner, gpu_types, eager_celery):
    """Two projects of 8 a100 each fill the cluster's 16; a window takes gpu-a100-1 (8) out:
    their queues go down to 4 each, so when the second project asks for its 4 Kueue takes back
    what the first borrowed instead of admitting 4 GPUs no node has."""
    from tests.support.kueue import nominal_a100

    first, second = make_tenant(queued_cluster, a100=8), make_tenant(queued_cluster, a100=8)
    start = timezone.now().replace(microsecond=0) + dt.timedelta(minutes=2)
    window = announce(nodes=["gpu-a100-1"], start=start, end=start + dt.timedelta(hours=2))
    with kueue_cluster.api_client() as client:
        admin = Kube(client)
        with time_machine.travel(start + dt.timedelta(seconds=5), tick=True), \
                TestCase.captureOnCommitCallbacks(execute=False) as reconciles:
            windows_advance()
        for callback in reconciles:  # the tenants' reconciles, on the real clock
            callback()
        assert (nominal_a100(admin, first), nominal_a100(admin, second)) == ("4", "4")
        tracker = Tracker()
        big = launch(first, owner, gpu_types, name="big", gpus=8, run_seconds=900)
        track_until(tracker, lambda: state_of(big).state == S.RUNNING, timeout=60,
                    describe=lambda: f"big {big.state}: {big.reason}")
        assert pod_nodes(admin, big) == ["gpu-a100-2"]  # the other one is cordoned
        small = launch(second, owner, gpu_types, name="small", gpus=4, run_seconds=900)
        track_until(tracker, lambda: state_of(big).state == S.QUEUED, timeout=90,
                    describe=lambda: f"big {big.state}: {big.reason}")
        track_until(tracker, lambda: state_of(small).state == S.RUNNING, timeout=90,
                    describe=lambda: f"small {small.state}: {small.reason}")
        with time_machine.travel(window.end + dt.timedelta(seconds=5), tick=True), \
                TestCase.captureOnCommitCallbacks(execute=False) as reconciles:
            windows_advance()
        for callback in reconciles:
            callback()
        assert (nominal_a100(admin, first), nominal_a100(admin, second)) == ("8", "8")
        assert not admin.get("Node", "gpu-a100-1")["spec"].get("unschedulable")
