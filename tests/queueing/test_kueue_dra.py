"""GPU types claimed through DRA, queued by Kueue on the real control plane (kueue_cluster runs
the DRA addon too: gpu-a100-dra-1 with two A100 devices in its ResourceSlice, gpu-h100-dra-1
with two H100s, all of the driver's class gpu.nvidia.com). Each DRA type has a DeviceClass of
the portal's own, and Kueue's Configuration maps each to the resource the tenant's ClusterQueue
holds that type's quota in (stack/k8s/kueue.py, tenants/queueing.py): Kueue admits a launch
against its claims' devices, each type against its own quota, holds one beyond the quota in the
queue, and admits it once devices come back; the real scheduler allocates the claim as without
Kueue."""

from __future__ import annotations

import uuid

import pytest

from kube.client import Kube
from stack.k8s.kueue import Kueue
from tenants.manifests import kueue_dra_resource
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.database import dra_gpu_type
from tests.support.kueue import launch, make_tenant
from tests.support.tracking import state_of, track_until
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State
NODE = "gpu-a100-dra-1"
DEVICES = kueue_dra_resource("a100-dra.gpu-portal.io")
H100_DEVICES = kueue_dra_resource("h100-dra.gpu-portal.io")


@pytest.fixture
def owner(db):
    from identity.models import User

    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def kueue_workload(kube: Kube, workload: Workload) -> dict | None:
    """Kueue's Workload for the portal's Job (named after it by Kueue), or None yet."""
    found = [w for w in kube.list("Workload", workload.tenant.namespace)["items"]
             if any(ref.get("name") == workload.object_name
                    for ref in w["metadata"].get("ownerReferences") or [])]
    return found[0] if found else None


def waiting_for(cluster, workload: Workload, resource: str) -> bool:
    """Whether Kueue keeps the workload from its quota for want of `resource`."""
    with cluster.api_client() as client:
        found = kueue_workload(Kube(client), workload)
    conditions = (found or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "QuotaReserved" and c["status"] == "False"
               and resource in c.get("message", "") for c in conditions)


def test_kueue_admits_a_dra_launch_against_its_claims_devices(queued_cluster, kueue_cluster,
                                                              owner, gpu_types):
    dra = dra_gpu_type()
    tenant = make_tenant(queued_cluster, a100=0, borrowing=0)
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_by_type": {"a100-dra": 2}})
    tenant_reconcile(tenant_id=tenant.pk)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        queue = kube.get("ClusterQueue", tenant.namespace)
        (gpus,) = [g for g in queue["spec"]["resourceGroups"] if DEVICES in g["coveredResources"]]
        flavor = next(f for f in gpus["flavors"] if f["name"] == "gpu-a100-dra")
        assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}[DEVICES] == "2"
        assert kube.get("ResourceFlavor", "gpu-a100-dra")["spec"]["nodeLabels"] == \
            {"gputype": "a100-dra"}
    tracker = Tracker()
    first = launch(tenant, owner, gpu_types, name="first", gpus=2, run_seconds=8, gpu_type=dra)
    track_until(tracker, lambda: state_of(first).state == S.RUNNING, timeout=90,
                describe=lambda: f"{first.state}: {first.reason}")
    assert first.node == NODE
    with kueue_cluster.api_client() as client:
        admitted = kueue_workload(Kube(client), first)
    assert admitted is not None
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"][DEVICES] == "gpu-a100-dra"
    assert assignment["resourceUsage"][DEVICES] == "2"
    # the quota's two devices are taken: the next launch waits in the queue, not at the
    # scheduler, and Kueue says which resource it waits for
    second = launch(tenant, owner, gpu_types, name="second", gpus=1, run_seconds=600,
                    gpu_type=dra)
    assert second.state == S.QUEUED

    track_until(tracker, lambda: waiting_for(kueue_cluster, second, DEVICES), timeout=60,
                describe=lambda: f"{second.state}: {second.reason}")
    assert state_of(second).state == S.QUEUED
    # the first finishes and gives its devices back: the second is admitted and runs there
    track_until(tracker, lambda: state_of(second).state == S.RUNNING, timeout=120,
                describe=lambda: f"first {state_of(first).state}; second {second.state}: "
                                 f"{second.reason}")
    assert state_of(first).state == S.SUCCEEDED
    assert second.node == NODE


def test_two_dra_types_of_one_device_class_are_held_and_admitted_apart(
        queued_cluster, kueue_cluster, owner, gpu_types):
    """An A100 and an H100 type, both whole GPUs of the driver's gpu.nvidia.com: two tenants
    each hold one of each. With one resource for the class, an A100 launch beyond its type's
    quota would be admitted in the H100 flavor (its quota free there) and its pod never placed
    (the flavor's node labels and its claim disagree); with a class and a resource per type it
    waits for its own type's quota, and each type's launches are admitted against their own."""
    a100, h100 = dra_gpu_type("a100"), dra_gpu_type("h100")
    tenants = []
    for _ in range(2):
        tenant = make_tenant(queued_cluster, a100=0, borrowing=0)
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_by_type": {"a100-dra": 1, "h100-dra": 1}})
        tenant_reconcile(tenant_id=tenant.pk)
        tenants.append(tenant)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        # the portal made each type's own DeviceClass, the driver's narrowed to its board
        klass = kube.get("DeviceClass", "h100-dra.gpu-portal.io")
        assert "NVIDIA H100 80GB HBM3" in klass["spec"]["selectors"][0]["cel"]["expression"]
        queue = kube.get("ClusterQueue", tenants[0].namespace)
        (gpus,) = [g for g in queue["spec"]["resourceGroups"] if DEVICES in g["coveredResources"]]
        quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
                  for f in gpus["flavors"]}
        assert (quotas["gpu-a100-dra"][DEVICES], quotas["gpu-a100-dra"][H100_DEVICES]) == ("1", "0")
        assert (quotas["gpu-h100-dra"][DEVICES], quotas["gpu-h100-dra"][H100_DEVICES]) == ("0", "1")
    tracker = Tracker()
    first = launch(tenants[0], owner, gpu_types, name="a100-0", gpus=1, run_seconds=600,
                   gpu_type=a100)
    track_until(tracker, lambda: state_of(first).state == S.RUNNING, timeout=90,
                describe=lambda: f"{first.state}: {first.reason}")
    # the first tenant's A100 quota is taken, its H100 quota free: another A100 launch waits
    # for the A100 resource rather than being admitted against the H100 flavor's quota
    more = launch(tenants[0], owner, gpu_types, name="a100-more", gpus=1, run_seconds=600,
                  gpu_type=a100)

    track_until(tracker, lambda: waiting_for(kueue_cluster, more, DEVICES), timeout=60,
                describe=lambda: f"{more.state}: {more.reason}")
    # the other tenant's launches of both types are admitted, each against its own type's
    # quota, and the scheduler puts each on its type's node (the first tenant's queue is
    # strictly first in, first out: its waiting A100 launch is its head)
    running = [first] + [launch(tenants[1], owner, gpu_types, name=f"{t.slug}-1", gpus=1,
                                run_seconds=600, gpu_type=t) for t in (a100, h100)]
    for workload in running:
        track_until(tracker, lambda w=workload: state_of(w).state == S.RUNNING, timeout=90,
                    describe=lambda w=workload: f"{w.name}: {state_of(w).state} "
                                                f"{state_of(w).reason}")
    assert {state_of(w).name: state_of(w).node for w in running} == {
        "a100-0": NODE, "a100-dra-1": NODE, "h100-dra-1": "gpu-h100-dra-1"}
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        for workload in running:
            (assignment,) = kueue_workload(kube, workload)["status"]["admission"][
                "podSetAssignments"]
            own, flavor = ((DEVICES, "gpu-a100-dra") if workload.gpu_type_id == a100.pk
                           else (H100_DEVICES, "gpu-h100-dra"))
            assert assignment["resourceUsage"][own] == "1", assignment
            assert assignment["flavors"][own] == flavor, assignment
    assert state_of(more).state == S.QUEUED


def not_mapped(cluster, workload: Workload) -> str:
    """Kueue's word that the workload's claims name a class its Configuration does not map."""
    with cluster.api_client() as client:
        found = kueue_workload(Kube(client), workload)
    conditions = (found or {}).get("status", {}).get("conditions") or []
    return next((c["message"] for c in conditions if c["type"] == "QuotaReserved"
                 and "is not mapped" in c.get("message", "")), "")


def test_a_dra_type_added_later_is_admitted_once_kueue_restarts_with_its_mapping(
        queued_cluster, kueue_cluster, owner, gpu_types):
    """Kueue reads its deviceClassMappings when it starts: a DRA type added after, whose class
    the portal makes at once, stays queued, Kueue saying its class is not mapped, until
    Kueue is restarted with the type's lines; then it is admitted and runs."""
    from catalogue.models import GpuType
    from stack.k8s.addons import addon
    from stack.k8s.dra import type_classes

    late = GpuType.objects.create(
        slug="late-dra", name="NVIDIA A100 80GB (DRA, added later)", memory_gb=80,
        resource_name="nvidia.com/gpu", node_selector={"gputype": "a100-dra"}, sharing="dra",
        device_class="gpu.nvidia.com", product="NVIDIA A100-SXM4-80GB")
    tenant = make_tenant(queued_cluster, a100=0, borrowing=0)
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_by_type": {"late-dra": 1}})
    tenant_reconcile(tenant_id=tenant.pk)
    tracker = Tracker()
    waiting = launch(tenant, owner, gpu_types, name="late", gpus=1, run_seconds=600,
                     gpu_type=late)
    track_until(tracker, lambda: bool(not_mapped(kueue_cluster, waiting)), timeout=60,
                describe=lambda: f"{waiting.state}: {waiting.reason}")
    message = not_mapped(kueue_cluster, waiting)
    assert "DeviceClass late-dra.gpu-portal.io is not mapped" in message, message
    assert state_of(waiting).state == S.QUEUED
    kueue = addon(kueue_cluster, "kueue")
    assert isinstance(kueue, Kueue)
    try:
        kueue.remap([*type_classes(), "late-dra.gpu-portal.io"])
        track_until(tracker, lambda: state_of(waiting).state == S.RUNNING, timeout=120,
                    describe=lambda: f"{state_of(waiting).state}: {state_of(waiting).reason}")
    finally:
        kueue.remap(type_classes())
    assert state_of(waiting).node == NODE


def test_kueue_admits_a_partitionable_gpus_whole_and_profile_types_apart_and_the_scheduler_keeps_the_counters(  # noqa: E501
        queued_cluster, kueue_cluster, owner, gpu_types):
    """The H100s are partitionable: a 1g.10gb type and the whole-GPU type each have their own
    quota in Kueue, which does not know they share the GPUs. A whole-GPU launch admitted while
    a profile holds part of one GPU waits at the scheduler, as the counters say."""
    from tests.support.database import dra_mig_gpu_type

    whole, part = dra_gpu_type("h100"), dra_mig_gpu_type("1g.10gb")
    tenant = make_tenant(queued_cluster, a100=0, borrowing=0)
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_by_type": {"h100-dra": 2, "h100-1g-10gb-dra": 1}})
    tenant_reconcile(tenant_id=tenant.pk)
    tracker = Tracker()
    sliced = launch(tenant, owner, gpu_types, name="sliced", gpus=1, run_seconds=600,
                    gpu_type=part)
    track_until(tracker, lambda: state_of(sliced).state == S.RUNNING, timeout=90,
                describe=lambda: f"{sliced.state}: {sliced.reason}")
    both = launch(tenant, owner, gpu_types, name="both", gpus=2, run_seconds=600,
                  gpu_type=whole)
    # admitted by Kueue against the whole-GPU type's own quota, then kept by the scheduler
    # (Kueue's waitForPodsReady evicts it after a while: what it admitted is noted when seen)
    seen: dict = {}

    def admitted_then_kept() -> bool:
        with kueue_cluster.api_client() as client:
            found = kueue_workload(Kube(client), both) or {}
        admission = (found.get("status") or {}).get("admission")
        if admission:
            seen["usage"] = admission["podSetAssignments"][0]["resourceUsage"]
        return "usage" in seen and "cannot allocate all claims" in (state_of(both).reason or "")

    track_until(tracker, admitted_then_kept, timeout=60,
                describe=lambda: f"{state_of(both).state}: {state_of(both).reason}; {seen}")
    assert seen["usage"][H100_DEVICES] == "2", seen
    assert state_of(sliced).state == S.RUNNING
