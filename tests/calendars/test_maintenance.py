"""Maintenance windows on kubesim (over HTTP), the portal's clock moved with time-machine: a
crossing launch is placed off the window's nodes or refused, the owners are told at the
announcement, 24 h and 1 h ahead (each once), the beat cordons and drains at the start and
uncordons at the end, and a drain killed midway resumes without stopping anything twice."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext

from audit.models import AuditRecord
from calendars import maintenance
from calendars.admission import MaintenanceWindowRefused
from calendars.maintenance import windows_advance
from calendars.models import MaintenanceWindow
from calendars.services import window_cancel, window_create
from calendars.validation import window_clean
from catalogue.models import GpuType, Template
from cluster.capacity import gpu_capacity
from kube.client import Conflict, Kube, NotFound
from kube.labels import CORDON_ANNOTATION, LABEL_WORKLOAD_ID
from notifications.models import Kind, Notification
from tests.fixtures import factories
from tests.support.cluster import cluster_cache_caught_up
from tests.support.waiting import eventually
from workloads.advice import launch_advice, launch_context
from workloads.manifests import SERVICE_ACCOUNT_NAME
from workloads.models import Workload
from workloads.objects import workload_objects_create
from workloads.services import workload_launch

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
NAMESPACE = "gp-maint-lab"


@pytest.fixture
def clock():
    # ticking: the read model's threads wait on real time
    with time_machine.travel(NOW, tick=True) as traveller:
        yield traveller


@pytest.fixture
def kube(cluster):
    kube = Kube()
    for obj in ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": SERVICE_ACCOUNT_NAME, "namespace": NAMESPACE}}):
        try:
            kube.create(obj)
        except Conflict:  # left by an earlier test of the session
            pass
    yield kube
    for pod in kube.list("Pod", NAMESPACE)["items"]:
        kube.delete("Pod", pod["metadata"]["name"], NAMESPACE)
    # gone, not terminating: the next test counts the GPUs free
    eventually(lambda: not kube.list("Pod", NAMESPACE)["items"], timeout=30,
               message="the test's pods are still terminating")
    for node in kube.list("Node")["items"]:  # the session's kubesim is shared: no cordon stays
        annotations = (node["metadata"].get("annotations") or {})
        if node["spec"].get("unschedulable") or CORDON_ANNOTATION in annotations:
            kube.patch("Node", node["metadata"]["name"],
                       {"spec": {"unschedulable": None},
                        "metadata": {"annotations": {CORDON_ANNOTATION: None}}})


@pytest.fixture
def lab(db, gpu_types):
    return factories.make_tenant("maint-lab", namespace=NAMESPACE, gpus_total=64, cpu=256,
                                 memory_gb=1024, max_workloads=100,
                                 gpus_by_type={"a100": 16, "v100": 16})


@pytest.fixture
def users(db):
    model = get_user_model()
    return {name: model.objects.create(username=name, keystone_user_id=f"id-{name}")
            for name in ("ann", "bob")}


def announce(**data) -> MaintenanceWindow:
    data = {"reason": "driver update", "drain": False, **data}
    for key in ("start", "end"):
        data[key] = data[key].isoformat()
    with TestCase.captureOnCommitCallbacks(execute=True):
        return window_create(acting_user=None, fields=window_clean(data))


def launch(tenant, user, *, gpus: int, minutes: int | None, nodes: int = 1, name: str = "train"):
    request = {"name": name, "template": Template.objects.get(slug="custom"), "kind": "batch",
               "gpu_type": lab_type("a100"),
               "gpu_count": gpus, "nodes": nodes, "image": "busybox:1.36", "cpu": 1,
               "memory": 1, "max_runtime_minutes": minutes, "command": ["sleep", "60"]}
    workload, _ = workload_launch(tenant=tenant, user=user, request=request)
    return workload


def lab_type(slug: str) -> GpuType:
    return GpuType.objects.get(slug=slug)


def told(key_part: str = "") -> list[tuple[str, str]]:
    rows = Notification.objects.filter(kind=Kind.MAINTENANCE, key__contains=key_part)
    return sorted((n.user.username, n.key) for n in rows)


# --- placement -------------------------------------------------------------------------------

def test_a_crossing_launch_is_placed_off_the_window_and_the_scheduler_keeps_it_off(
        lab, users, kube, clock, eager_celery):
    cluster_cache_caught_up()
    window = announce(nodes=["gpu-a100-1"], start=NOW + dt.timedelta(hours=2),
                      end=NOW + dt.timedelta(hours=6))
    assert window.affected == {"gpu-a100-1": {"gpu_type": "a100", "gpus": 8}}
    crossing = launch(lab, users["ann"], gpus=8, minutes=180)
    before = launch(lab, users["ann"], gpus=1, minutes=60, name="short")
    assert crossing.launch_spec["avoid_nodes"] == ["gpu-a100-1"]
    assert before.launch_spec["avoid_nodes"] == []  # it ends before the start
    workload_objects_create(crossing, kube)
    job = kube.get("Job", crossing.object_name, NAMESPACE)
    assert job["spec"]["template"]["spec"]["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                   "values": ["gpu-a100-1"]}]}]}}}

    def node_of_its_pod() -> str:
        pods = kube.list("Pod", NAMESPACE,
                         label_selector=f"{LABEL_WORKLOAD_ID}={crossing.pk}")["items"]
        return pods[0]["spec"].get("nodeName", "") if pods else ""

    eventually(node_of_its_pod, timeout=10, message="its pod was not scheduled")
    assert node_of_its_pod() == "gpu-a100-2"
    kube.delete("Job", crossing.object_name, NAMESPACE)


def test_a_launch_no_node_outside_can_hold_is_refused_naming_the_window(lab, users, kube,
                                                                        clock):
    cluster_cache_caught_up()
    announce(gpu_type="a100", start=NOW + dt.timedelta(hours=2, minutes=10),
             end=NOW + dt.timedelta(hours=6))
    with pytest.raises(MaintenanceWindowRefused) as refused:
        launch(lab, users["ann"], gpus=2, minutes=None)
    message = str(refused.value)
    assert refused.value.code == "maintenance_window"
    assert "(driver update) of every a100 node from 2026-11-20 14:10 UTC to 2026-11-20 18:00 UTC" \
        in message
    # (the clock ticks: a few seconds less than 2 h 10 min are left)
    assert "set a maximum runtime under 2 h 09 min or launch after 2026-11-20 18:00 UTC" in message
    assert not Workload.objects.exists()
    # one that ends before the start runs as ever
    assert launch(lab, users["ann"], gpus=2, minutes=120).launch_spec["avoid_nodes"] == []
    # the launch page's live check says the same before submit
    notes = launch_advice(launch_context(tenant=lab, user=users["ann"], gpu_type=lab_type("a100"),
                                         gpus_per_node=2))
    assert [level for level, text in notes if "maintenance #" in text] == ["error"]


def test_a_distributed_launch_needs_enough_nodes_outside(lab, users, kube, clock):
    cluster_cache_caught_up()
    announce(nodes=["gpu-a100-2"], start=NOW + dt.timedelta(hours=1),
             end=NOW + dt.timedelta(hours=3))
    with pytest.raises(MaintenanceWindowRefused, match="1 other a100 node can hold 4 GPUs "
                                                       "each, and it needs 2"):
        launch(lab, users["ann"], gpus=4, nodes=2, minutes=90)
    # the check before submit says the same: it knows the nodes
    notes = launch_advice(launch_context(tenant=lab, user=users["ann"], gpu_type=lab_type("a100"),
                                         gpus_per_node=4, nodes=2, max_runtime_minutes=90))
    assert [level for level, text in notes if "1 other a100 node can hold 4 GPUs each, and it "
            "needs 2" in text] == ["warning"], notes
    # one node of 4 is placed off the window's node
    notes = launch_advice(launch_context(tenant=lab, user=users["ann"], gpu_type=lab_type("a100"),
                                         gpus_per_node=4, max_runtime_minutes=90))
    # beside the capacity outlook (catalogue/selectors.py, the calendar's entry): the 8 GPUs
    # the window takes, from what is free now (what earlier tests of the session left running
    # counts)
    free = gpu_capacity()["a100"].free
    assert free >= 8
    assert any(text.endswith(f"{free - 8} from 13:00 (maintenance), {free} from 15:00 "
                             "(maintenance ends) — see the calendar.") for _, text in notes), notes
    notes = [note for note in notes if "maintenance #" in note[1]]
    assert notes == [("info", "Its maximum runtime (1 h 30 min) would cross maintenance "
                              f"#{MaintenanceWindow.objects.get().pk} (driver update) from "
                              "2026-11-20 13:00 UTC to 2026-11-20 15:00 UTC: it is placed on "
                              "other a100 nodes than gpu-a100-2.")]



def test_a_launch_is_checked_against_every_window_in_memory(lab, users, kube, clock):
    """Each live window is matched against the read model's nodes in memory: a launch checked
    against six windows makes no more queries than against one (the first cut asked for the
    GPU types once per window), and only the windows on its type's nodes place it."""
    cluster_cache_caught_up()
    hours = iter(range(2, 100, 3))

    def window(**target) -> MaintenanceWindow:
        start = NOW + dt.timedelta(hours=next(hours))
        return announce(start=start, end=start + dt.timedelta(hours=2), **target)

    a100 = lab_type("a100")

    def placement() -> maintenance.Placement:  # no maximum runtime: it crosses every window
        return maintenance.launch_placement(gpu_type=a100, gpus_per_node=1, seconds=None)

    named = window(nodes=["gpu-a100-1"])
    with CaptureQueriesContext(connection) as one:
        assert placement().avoid == ("gpu-a100-1",)
    ours = [named, window(nodes=["gpu-a100-2"]), window(node_selector={"gputype": "a100"})]
    window(gpu_type="v100"), window(gpu_type="t4"), window(node_selector={"gputype": "v100"})
    with CaptureQueriesContext(connection) as six:
        placed = placement()
    assert len(six) == len(one) == 1  # the live windows
    assert {w.pk for w in placed.windows} == {w.pk for w in ours}
    assert set(placed.avoid) == set(ours[-1].affected)  # every a100 node


# --- notices ---------------------------------------------------------------------------------

@pytest.fixture
def waiting(lab, users):
    """ann's queued a100 job with no limit (it would run into any window) and bob's, which
    ends 20 minutes after it starts."""
    ann = factories.make_workload(lab, users["ann"], name="long", kind="batch", port=None,
                                  state=Workload.State.QUEUED)
    bob = factories.make_workload(lab, users["bob"], name="short", kind="batch", port=None,
                                  state=Workload.State.QUEUED, max_runtime_minutes=20)
    return ann, bob


def test_owners_are_told_at_the_announcement_24_h_and_1_h_ahead_each_once(
        waiting, kube, clock, eager_celery):
    ann, _ = waiting
    start = NOW + dt.timedelta(days=2)
    window = announce(gpu_type="a100", start=start, end=start + dt.timedelta(hours=4))
    assert told() == [("ann", f"maintenance:{window.pk}:announced:{ann.pk}")]
    windows_advance()  # nothing due yet
    assert len(told()) == 1
    clock.move_to(start - dt.timedelta(hours=23))
    windows_advance()
    windows_advance()  # a second run tells nobody again
    assert told(":24h:") == [("ann", f"maintenance:{window.pk}:24h:{ann.pk}")]
    clock.move_to(start - dt.timedelta(minutes=30))
    windows_advance()
    windows_advance()
    assert told(":1h:") == [("ann", f"maintenance:{window.pk}:1h:{ann.pk}")]
    window.refresh_from_db()
    assert window.notified_24h_at is not None and window.notified_1h_at is not None
    assert "would still be running then" in Notification.objects.get(key__contains=":1h:").text


def test_a_window_announced_under_24_h_ahead_sends_no_24_h_notice(waiting, kube, clock,
                                                                  eager_celery):
    window = announce(gpu_type="a100", start=NOW + dt.timedelta(hours=10),
                      end=NOW + dt.timedelta(hours=12))
    windows_advance()
    clock.move_to(NOW + dt.timedelta(hours=9, minutes=30))
    windows_advance()
    assert sorted(key.split(":")[2] for _, key in told()) == ["1h", "announced"]
    window.refresh_from_db()
    assert window.notified_24h_at is None


def test_a_cancelled_window_is_called_off_and_only_those_told_hear_it(waiting, kube, clock,
                                                                      eager_celery):
    window = announce(gpu_type="a100", start=NOW + dt.timedelta(hours=30),
                      end=NOW + dt.timedelta(hours=32))
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert window_cancel(window=window, acting_user=None)
    window.refresh_from_db()
    assert window.state == MaintenanceWindow.State.CANCELLED
    assert told(":cancelled") == [("ann", f"maintenance:{window.pk}:cancelled")]
    clock.move_to(NOW + dt.timedelta(hours=31))
    windows_advance()  # the beat leaves it be: no cordon
    assert not kube.get("Node", "gpu-a100-1")["spec"].get("unschedulable")


# --- the start and the end -------------------------------------------------------------------

def bound_pod(kube: Kube, workload: Workload, node: str) -> None:
    """A pod of the workload's, bound to `node` (as the scheduler would have)."""
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{workload.object_name}-pod", "namespace": NAMESPACE,
        "labels": {LABEL_WORKLOAD_ID: str(workload.pk)}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox:1.36"}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}})


def actions(action: str) -> list[str]:
    return sorted(AuditRecord.objects.filter(action=action).values_list("target", flat=True))


@pytest.fixture
def v100_window(lab, users, kube, clock, eager_celery):
    """A drained window on both v100 nodes in an hour; gpu-v100-2 cordoned by an admin
    already; ann's and bob's services run on gpu-v100-1, carl's on the t4 node."""
    kube.patch("Node", "gpu-v100-2", {"spec": {"unschedulable": True}})
    carl = get_user_model().objects.create(username="carl", keystone_user_id="id-carl")
    running = []
    for owner, node in (("ann", "gpu-v100-1"), ("bob", "gpu-v100-1"), ("carl", "gpu-t4-1")):
        workload = factories.make_workload(lab, users.get(owner) or carl, name=f"{owner}-nb",
                                           gpu_type="t4" if node == "gpu-t4-1" else "v100",
                                           started_at=NOW - dt.timedelta(hours=1))
        bound_pod(kube, workload, node)
        running.append(workload)
    window = announce(gpu_type="v100", drain=True, start=NOW + dt.timedelta(hours=1),
                      end=NOW + dt.timedelta(hours=3))
    return window, running


def test_the_start_cordons_and_drains_and_the_end_uncordons_only_its_own(v100_window, kube,
                                                                          clock):
    window, (ann, bob, carl) = v100_window
    clock.move_to(window.start + dt.timedelta(seconds=5))
    assert windows_advance() == {window.pk: MaintenanceWindow.State.ACTIVE}
    window.refresh_from_db()
    assert window.cordoned == ["gpu-v100-1"]  # gpu-v100-2 was an admin's: not recorded
    node = kube.get("Node", "gpu-v100-1")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][CORDON_ANNOTATION] == f"maintenance-{window.pk}"
    for workload in (ann, bob, carl):
        workload.refresh_from_db()
    assert (ann.state, bob.state, carl.state) == ("stopping", "stopping", "running")
    assert f"Stopped for maintenance #{window.pk} (driver update)" in ann.reason
    assert window.drained_at is not None
    windows_advance()  # again: nothing twice
    assert actions("node.cordon") == ["gpu-v100-1"]
    assert actions("workload.stop") == sorted([ann.object_name, bob.object_name])

    clock.move_to(window.end + dt.timedelta(seconds=5))
    windows_advance()
    windows_advance()
    window.refresh_from_db()
    assert (window.state, window.ended_at is not None) == ("ended", True)
    assert not kube.get("Node", "gpu-v100-1")["spec"].get("unschedulable")
    assert CORDON_ANNOTATION not in (kube.get("Node", "gpu-v100-1")["metadata"]
                                     .get("annotations") or {})
    assert kube.get("Node", "gpu-v100-2")["spec"]["unschedulable"] is True  # the admin's stays
    assert actions("node.uncordon") == ["gpu-v100-1"]


def test_a_window_cancelled_in_progress_ends_at_once(v100_window, kube, clock):
    window, _ = v100_window
    clock.move_to(window.start + dt.timedelta(minutes=1))
    windows_advance()
    with TestCase.captureOnCommitCallbacks(execute=True):
        window_cancel(window=window, acting_user=None)
    window.refresh_from_db()
    assert window.state == MaintenanceWindow.State.ENDED
    assert not kube.get("Node", "gpu-v100-1")["spec"].get("unschedulable")


def test_a_drain_killed_midway_resumes_without_stopping_anything_twice(v100_window, kube,
                                                                        clock, monkeypatch):
    window, (ann, bob, _) = v100_window
    real_stop = maintenance.workload_stop
    calls = []

    def dies_after_the_first(**kwargs):
        if calls:
            raise SystemExit("worker killed")
        calls.append(kwargs["workload"].pk)
        return real_stop(**kwargs)

    monkeypatch.setattr(maintenance, "workload_stop", dies_after_the_first)
    clock.move_to(window.start + dt.timedelta(seconds=5))
    with pytest.raises(SystemExit):
        windows_advance()
    window.refresh_from_db()
    assert window.cordoned == ["gpu-v100-1"] and window.drained_at is None
    monkeypatch.setattr(maintenance, "workload_stop", real_stop)
    windows_advance()  # the restarted worker
    window.refresh_from_db()
    assert window.drained_at is not None
    for workload in (ann, bob):
        workload.refresh_from_db()
        assert workload.state == "stopping"
    assert calls == [ann.pk]
    assert actions("workload.stop") == sorted([ann.object_name, bob.object_name])  # once each
    stopped = sorted(Notification.objects.filter(kind=Kind.STOPPED)
                     .values_list("key", flat=True))
    assert stopped == sorted([f"stopped:{ann.pk}", f"stopped:{bob.pk}"])
    assert actions("node.cordon") == ["gpu-v100-1"]


def test_a_node_gone_from_the_cluster_is_not_cordoned(lab, kube, clock):
    window = announce(nodes=["gpu-gone-9"], start=NOW + dt.timedelta(minutes=10),
                      end=NOW + dt.timedelta(hours=1))
    clock.move_to(window.start)
    windows_advance()
    window.refresh_from_db()
    assert (window.state, window.cordoned) == ("active", [])
    with pytest.raises(NotFound):
        kube.patch("Node", "gpu-gone-9", {})


def test_a_drained_batch_job_is_put_back_in_line_elsewhere_once(lab, users, kube, clock,
                                                                 eager_celery, monkeypatch):
    """A window on gpu-v100-1 only: ann's batch job there is stopped and a copy of it is
    submitted, kept off gpu-v100-1 (gpu-v100-2 can hold it); a drain run again makes no second
    copy. Her service there is stopped, not copied."""
    sent = []
    monkeypatch.setattr("workloads.tasks.workload_create_task.delay",
                        lambda pk: sent.append(("create", pk)))
    monkeypatch.setattr("workloads.tasks.workload_stop_task.delay",
                        lambda pk: sent.append(("stop", pk)))
    job = factories.make_workload(lab, "ann", name="sweep", template="custom", kind="batch",
                                  gpu_type="v100", gpu_count=2, image="busybox:1.36", port=None,
                                  max_runtime_minutes=600, started_at=NOW - dt.timedelta(hours=1))
    service = factories.make_workload(lab, "ann", name="nb", gpu_type="v100",
                                      started_at=NOW - dt.timedelta(hours=1))
    for workload in (job, service):
        bound_pod(kube, workload, "gpu-v100-1")
    window = announce(nodes=["gpu-v100-1"], drain=True, start=NOW + dt.timedelta(minutes=30),
                      end=NOW + dt.timedelta(hours=2))
    clock.move_to(window.start + dt.timedelta(seconds=5))
    with TestCase.captureOnCommitCallbacks(execute=True):
        windows_advance()
    job.refresh_from_db()
    service.refresh_from_db()
    assert (job.state, service.state) == ("stopping", "stopping")
    copy = Workload.objects.get(idempotency_key=f"requeue-of-{job.pk}")
    assert f"put back in line as #{copy.pk}" in job.reason
    assert (copy.state, copy.owner, copy.name, copy.gpu_count, copy.kind) == \
        ("submitted", job.owner, "sweep", 2, "batch")
    assert copy.launch_spec["avoid_nodes"] == ["gpu-v100-1"]
    assert sorted(sent) == [("create", copy.pk), ("stop", job.pk), ("stop", service.pk)]
    assert not Workload.objects.filter(idempotency_key=f"requeue-of-{service.pk}").exists()
    MaintenanceWindow.objects.filter(pk=window.pk).update(drained_at=None)  # a drain again
    windows_advance()
    assert Workload.objects.filter(idempotency_key__startswith="requeue-of-").count() == 1
    assert actions("workload.requeue") == [copy.object_name]


def test_a_drained_batch_job_no_other_node_can_hold_waits_for_the_nodes(lab, users, kube,
                                                                         clock, eager_celery):
    """Every v100 node in maintenance: the copy is free to take them again once they are back
    (the cordon keeps it off them until then)."""
    job = factories.make_workload(lab, "ann", name="sweep", template="custom", kind="batch",
                                  gpu_type="v100", image="busybox:1.36", port=None,
                                  started_at=NOW - dt.timedelta(hours=1))
    bound_pod(kube, job, "gpu-v100-1")
    window = announce(gpu_type="v100", drain=True, start=NOW + dt.timedelta(minutes=30),
                      end=NOW + dt.timedelta(hours=2))
    clock.move_to(window.start + dt.timedelta(seconds=5))
    windows_advance()
    copy = Workload.objects.get(idempotency_key=f"requeue-of-{job.pk}")
    assert copy.launch_spec["avoid_nodes"] == []
