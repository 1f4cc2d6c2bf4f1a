"""A maintenance window's re-layout of its nodes on kubesim: the layouts validated against what
the nodes' GPUs can take, the plan as announced (each node's change, the capacity per GPU type,
the quotas it would leave beyond it), and the beat: relabel after the drain, the GPU operator's
stand-in applies it, the new units are read, the node uncordoned; a failed or unapplied layout
keeps the node cordoned and tells the window's author; a node whose GPUs stay held is not
relabelled."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import TestCase

from audit.models import AuditRecord
from calendars.maintenance import windows_advance
from calendars.models import MaintenanceWindow
from calendars.services import window_create
from calendars.validation import WindowInvalid, window_clean
from cluster.capacity import cluster_nodes
from kube.client import Conflict, Kube
from kube.labels import CORDON_ANNOTATION
from notifications.models import Kind, Notification
from tests.fixtures import factories
from tests.support.cluster import cluster_cache_caught_up
from tests.support.database import demo_shared_gpu_types
from tests.support.gpu_operator import gpu_operator_running, node_restored
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
MIG_NODE = "gpu-a100-mig-1"
T4_NODE = "gpu-t4-shared-1"
NAMESPACE = "gp-relayout-lab"


@pytest.fixture
def clock():
    with time_machine.travel(NOW, tick=True) as traveller:
        yield traveller


@pytest.fixture
def shared_types(gpu_types):
    return demo_shared_gpu_types(gpu_types)


@pytest.fixture
def kube(cluster):
    kube = Kube()
    yield kube
    for node in (MIG_NODE, T4_NODE):  # the session's kubesim is shared: no cordon stays
        kube.patch("Node", node, {"spec": {"unschedulable": None},
                                  "metadata": {"annotations": {CORDON_ANNOTATION: None}}})


@pytest.fixture
def admin(db):
    return get_user_model().objects.create(username="root", keystone_user_id="id-root")


def window_data(**fields) -> dict:
    return {"nodes": [MIG_NODE], "start": NOW.isoformat(),
            "end": (NOW + dt.timedelta(hours=2)).isoformat(), "reason": "re-carve the A100s",
            "drain": True, **fields}


def announce(admin, **fields) -> MaintenanceWindow:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return window_create(acting_user=admin, fields=window_clean(window_data(**fields)))


def refusal(**fields) -> list[str]:
    with pytest.raises(WindowInvalid) as caught:
        window_clean(window_data(**fields))
    return caught.value.errors.get("relayout", [])


def node(name: str) -> dict:
    return next(n for n in cluster_nodes() if n["metadata"]["name"] == name)


def test_a_layout_is_checked_against_what_the_nodes_gpus_can_take(cluster, clock):
    cluster_cache_caught_up()
    clean = window_clean(window_data(relayout={MIG_NODE: {"mig_config": "all-2g.20gb"}}))
    assert clean["relayout"] == {MIG_NODE: {"mig_config": "all-2g.20gb"}}
    assert window_clean(window_data(nodes=[T4_NODE], relayout={T4_NODE: {"replicas": 2}})
                        )["relayout"] == {T4_NODE: {"replicas": 2}}
    assert refusal(relayout={MIG_NODE: {"mig_config": "all-5g.50gb"}}) == [
        f"{MIG_NODE}: A A100/H100 80GB GPU has no MIG layout 'all-5g.50gb': one of "
        "all-1g.10gb, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, all-7g.80gb, "
        "all-balanced or all-disabled."]
    assert refusal(nodes=[T4_NODE], relayout={T4_NODE: {"mig_config": "all-1g.10gb"}}) == [
        f"{T4_NODE}'s GPUs (Tesla-T4) cannot be partitioned with MIG."]
    assert refusal(relayout={MIG_NODE: {"replicas": 4}}) == [
        f"{MIG_NODE}'s GPUs are in MIG mode (all-1g.10gb): lay it out as all-disabled before "
        "time-slicing it."]
    assert refusal(nodes=[T4_NODE], relayout={T4_NODE: {"replicas": 65}}) == [
        f"{T4_NODE}: replicas is a whole number from 1 (no time-slicing) to 64."]
    assert refusal(relayout={MIG_NODE: {"mig_config": "all-3g.40gb"}}, drain=False) == [
        "A re-layout needs drain: true (the MIG manager and the device plugin act only on "
        "GPUs no pod holds)."]
    assert refusal(relayout={T4_NODE: {"replicas": 2}}) == [
        f"Not among the window's nodes: “{T4_NODE}”."]
    assert refusal(nodes=None, gpu_type="a100", relayout={MIG_NODE: {"replicas": 2}}) == [
        "A re-layout names its nodes: give the window's nodes by name."]
    assert refusal(relayout={MIG_NODE: {"mig_config": "all-3g.40gb", "replicas": 2}}) == [
        f'{MIG_NODE}: Give each node one of {{"mig_config": "all-2g.20gb"}} or '
        '{"replicas": 2}.']


def test_the_announcement_shows_the_change_its_capacity_and_the_quotas_beyond_it(
        cluster, clock, shared_types, admin):
    cluster_cache_caught_up()
    factories.make_tenant("relayout-lab", namespace=NAMESPACE, gpus_total=16,
                          gpus_by_type={"a100-1g-10gb": 8, "t4-shared": 12})
    window = announce(admin, nodes=[MIG_NODE, T4_NODE],
                      relayout={MIG_NODE: {"mig_config": "all-2g.20gb"},
                                T4_NODE: {"replicas": 2}})
    assert window.relayout_plan == {
        "nodes": {MIG_NODE: f"{MIG_NODE}: 14 × 1g.10gb → 6 × 2g.20gb (MIG all-2g.20gb)",
                  T4_NODE: f"{T4_NODE}: 16 × nvidia.com/gpu.shared → 8 × nvidia.com/gpu.shared"
                           " (time-sliced 2 ways)"},
        "gpu_types": [{"gpu_type": "a100-1g-10gb", "before": 14, "after": 0},
                      {"gpu_type": "t4-shared", "before": 16, "after": 8}],
        "warnings": [
            f"{MIG_NODE}'s 6 units of nvidia.com/mig-2g.20gb are no GPU type's: add one (GPU "
            "types page) for them to be launched.",
            "relayout-lab's quota of a100-1g-10gb (8) would exceed the 0 there would be; its "
            "quota is left as it is.",
            "relayout-lab's quota of t4-shared (12) would exceed the 8 there would be; its "
            "quota is left as it is."]}
    record = AuditRecord.objects.get(action="maintenance.announce")
    assert record.after["relayout"] == {MIG_NODE: {"mig_config": "all-2g.20gb"},
                                        T4_NODE: {"replicas": 2}}


def test_the_beat_relabels_after_the_drain_the_stand_in_applies_and_the_end_uncordons(
        cluster, kube, clock, shared_types, admin, monkeypatch):
    cluster_cache_caught_up()
    with cluster.api_client() as api, node_restored(api, MIG_NODE), \
            gpu_operator_running(cluster.api_client) as stand_in:
        # the stand-in acts once the relabel is looked at: as quick as it is, it could lay the
        # node out between the beat's relabel and its reading of the node right after, which
        # would then find it applied in the same run
        released = threading.Event()
        act = stand_in.reconcile
        monkeypatch.setattr(stand_in, "reconcile",
                            lambda core, node: (released.wait(30), act(core, node)))
        window = announce(admin, relayout={MIG_NODE: {"mig_config": "all-3g.40gb"}})
        windows_advance(now=NOW + dt.timedelta(minutes=1))
        window.refresh_from_db()
        assert window.cordoned == [MIG_NODE] and window.drained_at is not None
        assert window.relayout_state[MIG_NODE]["state"] == "relabelled"
        labels = kube.get("Node", MIG_NODE)["metadata"]["labels"]
        assert labels["nvidia.com/mig.config"] == "all-3g.40gb"
        relabel = AuditRecord.objects.get(action="node.relabel", target=MIG_NODE)
        assert relabel.before["units"] == {"nvidia.com/mig-1g.10gb": 14}
        assert relabel.after["units"] == {"nvidia.com/mig-3g.40gb": 4}
        released.set()

        def laid_out():
            labels = kube.get("Node", MIG_NODE)["metadata"]["labels"]
            return labels.get("nvidia.com/mig.config.state") == "success" \
                and labels.get("nvidia.com/mig-3g.40gb.count") == "4"

        eventually(laid_out, timeout=30, message="the stand-in did not lay the node out")
        after = kube.get("Node", MIG_NODE)
        assert {k: v for k, v in after["status"]["allocatable"].items()
                if k.startswith("nvidia.com/")} == {"nvidia.com/mig-3g.40gb": "4"}
        assert "nvidia.com/mig-1g.10gb.count" not in after["metadata"]["labels"]
        windows_advance(now=NOW + dt.timedelta(minutes=2))
        window.refresh_from_db()
        assert window.relayout_state[MIG_NODE]["state"] == "applied"
        # the capacity read from the cluster's read model shows the new units
        cluster_cache_caught_up()
        eventually(lambda: node(MIG_NODE)["status"]["allocatable"].get(
            "nvidia.com/mig-3g.40gb") == "4", timeout=10, message="the read model lags")
        windows_advance(now=NOW + dt.timedelta(hours=2, minutes=1))
        window.refresh_from_db()
        assert window.state == "ended"
        assert not kube.get("Node", MIG_NODE)["spec"].get("unschedulable")
        assert AuditRecord.objects.filter(action="maintenance.relayout", target=MIG_NODE).count() == 1


def test_a_failed_layout_keeps_the_node_cordoned_and_tells_the_author_and_the_admins(
        cluster, kube, clock, shared_types, admin):
    users = get_user_model().objects
    on_call = users.create(username="on-call", keystone_user_id="id-on-call", is_superuser=True)
    users.create(username="bystander", keystone_user_id="id-bystander")
    users.create(username="former", keystone_user_id="id-former", is_superuser=True,
                 is_active=False)
    cluster_cache_caught_up()
    with cluster.api_client() as api, node_restored(api, MIG_NODE):
        window = announce(admin, relayout={MIG_NODE: {"mig_config": "all-7g.80gb"}})
        windows_advance(now=NOW + dt.timedelta(minutes=1))
        # no MIG manager here: the test answers as one that failed would
        kube.patch("Node", MIG_NODE,
                   {"metadata": {"labels": {"nvidia.com/mig.config.state": "failed"}}})
        windows_advance(now=NOW + dt.timedelta(minutes=2))
        window.refresh_from_db()
        assert window.relayout_state[MIG_NODE]["state"] == "failed"
        assert "nvidia.com/mig.config.state=failed" in window.relayout_state[MIG_NODE]["reason"]
        told = Notification.objects.get(kind=Kind.MAINTENANCE, user=admin)
        assert told.title == f"Re-layout of {MIG_NODE} failed"
        assert "It stays cordoned" in told.text
        assert set(Notification.objects.filter(kind=Kind.MAINTENANCE, title=told.title)
                   .values_list("user__username", flat=True)) == {admin.username,
                                                                  on_call.username}
        windows_advance(now=NOW + dt.timedelta(hours=2, minutes=1))
        window.refresh_from_db()
        assert window.state == "ended"
        assert kube.get("Node", MIG_NODE)["spec"].get("unschedulable")
        assert AuditRecord.objects.filter(action="maintenance.relayout_failed").count() == 1


def test_a_layout_not_applied_by_the_end_fails_and_held_gpus_leave_the_node_as_it_was(
        cluster, kube, clock, shared_types, admin):
    cluster_cache_caught_up()
    with cluster.api_client() as api, node_restored(api, MIG_NODE), node_restored(api, T4_NODE):
        for obj in ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                    {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "holder", "namespace": NAMESPACE},
                     "spec": {"nodeName": T4_NODE, "tolerations": [
                         {"key": "nvidia.com/gpu", "operator": "Exists"}],
                         "containers": [{"name": "c", "image": "busybox:1.36", "resources": {
                             "limits": {"nvidia.com/gpu.shared": "1"}}}]}}):
            try:
                kube.create(obj)
            except Conflict:
                pass
        window = announce(admin, nodes=[MIG_NODE, T4_NODE],
                          relayout={MIG_NODE: {"mig_config": "all-balanced"},
                                    T4_NODE: {"replicas": 8}})
        windows_advance(now=NOW + dt.timedelta(minutes=1))
        window.refresh_from_db()
        assert window.relayout_state[T4_NODE]["state"] == "waiting"
        assert window.relayout_state[T4_NODE]["reason"] == \
            f"waiting for 1 pods to leave its GPUs: {NAMESPACE}/holder"
        assert window.relayout_state[MIG_NODE]["state"] == "relabelled"
        windows_advance(now=NOW + dt.timedelta(hours=2, minutes=1))
        window.refresh_from_db()
        states = {name: (entry["state"], entry["reason"])
                  for name, entry in window.relayout_state.items()}
        assert states == {
            MIG_NODE: ("failed", "not applied by the window's end (the agent reported no "
                                 "success)"),
            T4_NODE: ("failed", "its GPUs were still held at the window's end; its layout is "
                                "unchanged")}
        assert kube.get("Node", MIG_NODE)["spec"].get("unschedulable")
        t4 = kube.get("Node", T4_NODE)
        assert not t4["spec"].get("unschedulable")
        assert "nvidia.com/device-plugin.config" not in t4["metadata"]["labels"]
        texts = {n.title: n.text for n in Notification.objects.filter(user=admin)}
        assert "It keeps its old layout and is back in service." in \
            texts[f"Re-layout of {T4_NODE} failed"]
