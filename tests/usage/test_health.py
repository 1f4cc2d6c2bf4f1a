"""GPU health against kubesim's fault injection: XID and ECC make a GPU degraded, a GPU that
falls off the bus becomes lost; unhealthy GPUs are not free; the node is cordoned when that
is enabled; clearing the fault recovers all of it.

A kubesim of its own (the demo inventory: gpu-a100-1 and gpu-a100-2, 8 GPUs each): faults and
cordons must not leak into other tests. Scrapes are stamped with explicit times.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.request

import pytest
from django.utils import timezone

from audit.models import AuditRecord
from catalogue.models import GpuType
from cluster.capacity import capacity_by_type, gpu_capacity
from kube.client import Kube
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.cluster import cluster_cache_caught_up
from usage.health import CORDON_ANNOTATION, gpu_health_check
from usage.models import GpuDevice
from usage.services import usage_scrape

pytestmark = pytest.mark.django_db

FAULTY = [("gpu-a100-1", 3), ("gpu-a100-2", 5), ("gpu-a100-2", 6)]


@pytest.fixture(scope="module")
def sim(kubesim_factory):
    return kubesim_factory(inventory=DEMO_INVENTORY)


def control(sim, method: str, path: str, body: dict | None = None) -> None:
    request = urllib.request.Request(f"{sim.url}/kubesim/v1/{path}", method=method,
                                     data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        assert response.status < 300


@pytest.fixture
def kube(sim, settings, gpu_types):
    settings.KUBECONFIG = str(sim.kubeconfig)
    kube = Kube(sim.api_client())
    yield kube
    for node, index in FAULTY:
        control(sim, "DELETE", f"gpus/{node}/{index}/fault")
    for node in ("gpu-a100-1", "gpu-a100-2"):
        kube.patch("Node", node, {"spec": {"unschedulable": None},
                                  "metadata": {"annotations": {CORDON_ANNOTATION: None}}})


def device(node: str, index: int) -> GpuDevice:
    return GpuDevice.objects.get(node=node, index=index, mig_instance="")


def a100_allocatable() -> int:
    cluster_cache_caught_up()  # the portal's copy of the nodes has the last cordon
    return gpu_capacity()["a100"].allocatable


def test_faults_degrade_lose_exclude_cordon_and_recover(kube, sim, settings, login):
    t0 = timezone.now().replace(microsecond=0)
    usage_scrape(kube=kube, now=t0)
    assert gpu_health_check(now=t0, kube=kube).degraded == 0
    assert a100_allocatable() == 16

    # XID 79 (fallen off the bus): degraded; kubesim's device plugin also withdrew it from
    # allocatable: counted once, not twice
    control(sim, "POST", "gpus/gpu-a100-1/3/xid", {"xid": 79})
    # a double-bit ECC error: degraded; the device plugin keeps it, the portal does not
    control(sim, "POST", "gpus/gpu-a100-2/5/ecc", {"dbe": 2})
    # an application XID is the program's fault, not the GPU's
    control(sim, "POST", "gpus/gpu-a100-2/6/xid", {"xid": 13})
    t1 = t0 + dt.timedelta(seconds=15)
    usage_scrape(kube=kube, now=t1)
    report = gpu_health_check(now=t1, kube=kube)

    assert report.degraded == 2 and report.cordoned == []  # cordoning is off by default
    assert device("gpu-a100-1", 3).health == "degraded"
    assert device("gpu-a100-1", 3).health_reason == "XID 79: GPU has fallen off the bus"
    assert device("gpu-a100-2", 5).health_reason == "2 double-bit ECC errors"
    assert device("gpu-a100-2", 6).health == "ok"
    assert a100_allocatable() == 14

    # the admins see it: the banner on their pages, the dashboard's tables
    admin = login("admin")
    page = admin.get("/admin/gpus/").content.decode()
    assert 'id="gpu-health-alert"' in page and "gpu-a100-1/gpu3" in page
    assert "XID 79: GPU has fallen off the bus" in page
    assert '<tr data-node="gpu-a100-1">' in page and "degraded" in page
    assert 'data-col="usable">14<' in page
    assert 'id="gpu-health-alert"' in admin.get("/admin/gpu-types/").content.decode()

    # a GPU that stops reporting while the others go on: lost after 4 scrape intervals
    control(sim, "POST", "gpus/gpu-a100-2/6/lost")
    t2 = t1 + dt.timedelta(seconds=75)
    usage_scrape(kube=kube, now=t2)
    settings.PORTAL_GPU_HEALTH_CORDON = True
    report = gpu_health_check(now=t2, kube=kube)

    assert report.lost == 1 and device("gpu-a100-2", 6).health == "lost"
    assert sorted(report.cordoned) == ["gpu-a100-1", "gpu-a100-2"]
    for name in ("gpu-a100-1", "gpu-a100-2"):
        node = kube.get("Node", name)
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"][CORDON_ANNOTATION] == "gpu-health"
    assert a100_allocatable() == 0  # both a100 nodes cordoned
    # cordoned once per incident: the next check changes nothing
    assert gpu_health_check(now=t2, kube=kube).cordoned == []

    # the faults are cleared and the GPUs report healthy samples again: recovered, uncordoned
    for node, index in FAULTY:
        control(sim, "DELETE", f"gpus/{node}/{index}/fault")
    t3 = t2 + dt.timedelta(seconds=15)
    usage_scrape(kube=kube, now=t3)
    report = gpu_health_check(now=t3, kube=kube)

    assert report.recovered == 3
    assert sorted(report.uncordoned) == ["gpu-a100-1", "gpu-a100-2"]
    assert not GpuDevice.objects.exclude(health="ok").exists()
    for name in ("gpu-a100-1", "gpu-a100-2"):
        node = kube.get("Node", name)
        assert not node["spec"].get("unschedulable")
        assert CORDON_ANNOTATION not in (node["metadata"].get("annotations") or {})
    assert a100_allocatable() == 16
    assert list(AuditRecord.objects.filter(action__in=[
        "gpu.degraded", "gpu.lost", "gpu.recovered", "node.cordon", "node.uncordon"])
        .order_by("id").values_list("action", flat=True)) == [
        "gpu.degraded", "gpu.degraded", "gpu.lost", "node.cordon", "node.cordon",
        "gpu.recovered", "gpu.recovered", "gpu.recovered", "node.uncordon", "node.uncordon"]
    assert 'id="gpu-health-alert"' not in admin.get("/admin/gpus/").content.decode()


def test_a_node_an_admin_cordoned_stays_cordoned(kube, sim, settings):
    settings.PORTAL_GPU_HEALTH_CORDON = True
    kube.patch("Node", "gpu-a100-1", {"spec": {"unschedulable": True}})
    control(sim, "POST", "gpus/gpu-a100-1/3/xid", {"xid": 48})
    t0 = timezone.now().replace(microsecond=0)
    usage_scrape(kube=kube, now=t0)
    assert gpu_health_check(now=t0, kube=kube).cordoned == []
    control(sim, "DELETE", "gpus/gpu-a100-1/3/fault")
    usage_scrape(kube=kube, now=t0 + dt.timedelta(seconds=15))
    report = gpu_health_check(now=t0 + dt.timedelta(seconds=15), kube=kube)
    assert report.recovered == 1 and report.uncordoned == []
    assert kube.get("Node", "gpu-a100-1")["spec"]["unschedulable"] is True


def test_no_scrape_at_all_marks_nothing_lost(kube):
    t0 = timezone.now().replace(microsecond=0)
    usage_scrape(kube=kube, now=t0)
    report = gpu_health_check(now=t0 + dt.timedelta(minutes=10), kube=kube)
    assert report.skipped_lost_check and report.lost == 0
    assert not GpuDevice.objects.exclude(health="ok").exists()


def test_capacity_counts_an_unhealthy_gpu_once():
    """Pure: the device plugin may or may not have withdrawn the GPU already."""
    a100 = GpuType(slug="a100", node_selector={"gputype": "a100"})

    def node(allocatable: int) -> dict:
        return {"metadata": {"name": "n1", "labels": {"gputype": "a100"}},
                "status": {"capacity": {"nvidia.com/gpu": "8"},
                           "allocatable": {"nvidia.com/gpu": str(allocatable)}}}

    assert capacity_by_type([a100], [node(8)], unhealthy={"n1": 1})[0]["a100"].allocatable == 7
    assert capacity_by_type([a100], [node(7)], unhealthy={"n1": 1})[0]["a100"].allocatable == 7
    assert capacity_by_type([a100], [node(7)], unhealthy={"n1": 2})[0]["a100"].allocatable == 6
    assert capacity_by_type([a100], [node(8)], unhealthy={})[0]["a100"].allocatable == 8
