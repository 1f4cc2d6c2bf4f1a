"""A distributed workload in the queue: one entry (its group's one Kueue Workload, owned by its
JobSet or MPIJob) holding every GPU of every rank."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from tests.fixtures.factories import make_workload
from workloads.models import Workload
from workloads.queue import estimates, owner_name, pending_order

pytestmark = pytest.mark.django_db


def kueue_workload(kind: str, owner: str, created: str) -> dict:
    prefix = {"JobSet": "jobset", "MPIJob": "mpijob", "Job": "job"}[kind]
    return {"metadata": {"name": f"{prefix}-{owner}-1a2b3", "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": "x", "kind": kind, "name": owner,
                                              "controller": True}]},
            "spec": {"priority": 100}, "status": {"conditions": []}}


def test_a_groups_one_kueue_workload_stands_for_it_in_the_queue():
    items = [kueue_workload("JobSet", "wl-3-ddp", "2026-11-23T10:00:00Z"),
             kueue_workload("Job", "wl-4-train", "2026-11-23T10:00:01Z"),
             kueue_workload("MPIJob", "wl-5-allreduce", "2026-11-23T10:00:02Z")]
    assert [owner_name(w) for w in pending_order(items)] == [
        "wl-3-ddp", "wl-4-train", "wl-5-allreduce"]


def test_a_queued_group_waits_for_room_for_all_its_gpus(tenant_with_quota, gpu_types):
    """8 GPUs; a 4-GPU job runs until 11:00. A group of 2 nodes × 4 GPUs needs all 8: it
    starts when the job ends, not now (as 4 GPUs would)."""
    tenant = tenant_with_quota
    now = timezone.now().replace(microsecond=0)
    ends = now + dt.timedelta(hours=1)
    make_workload(tenant, "researcher", name="single", kind="batch", gpu_count=4,
                  started_at=now, expires_at=ends)
    group = make_workload(tenant, "researcher", name="ddp", template="pytorch-ddp",
                          kind="batch", gpu_count=4, nodes=2, launch_spec={"engine": "jobset"},
                          state=Workload.State.QUEUED, max_runtime_minutes=30)
    estimate = estimates(gpu_types["a100"], capacity=8, now=now)[group.pk]
    assert estimate.start == ends


@pytest.fixture
def tenant_with_quota(login, gpu_types):
    from tenants.models import Tenant
    from tenants.services import quota_update

    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 16, "gpus_by_type": {"a100": 16}})
    return tenant
