"""A GPU type claimed through DRA, queued by Kueue on the real control plane (kueue_cluster runs
the DRA addon too: gpu-a100-dra-1 with two A100 devices in its ResourceSlice). Kueue's
Configuration maps NVIDIA's device classes to the resource the tenant's ClusterQueue holds the
type's quota in (stack/k8s/kueue.py, tenants/queueing.py): Kueue admits a launch against its
claims' devices, holds one beyond the quota in the queue, and admits it once devices come back;
the real scheduler allocates the claim as without Kueue."""

from __future__ import annotations

import uuid

import pytest

from kube.client import Kube
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
DEVICES = kueue_dra_resource("gpu.nvidia.com")


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

    def waiting_for_devices() -> bool:
        with kueue_cluster.api_client() as client:
            found = kueue_workload(Kube(client), second)
        conditions = (found or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "QuotaReserved" and c["status"] == "False"
                   and DEVICES in c.get("message", "") for c in conditions)

    track_until(tracker, waiting_for_devices, timeout=60,
                describe=lambda: f"{second.state}: {second.reason}")
    assert state_of(second).state == S.QUEUED
    # the first finishes and gives its devices back: the second is admitted and runs there
    track_until(tracker, lambda: state_of(second).state == S.RUNNING, timeout=120,
                describe=lambda: f"first {state_of(first).state}; second {second.state}: "
                                 f"{second.reason}")
    assert state_of(first).state == S.SUCCEEDED
    assert second.node == NODE
