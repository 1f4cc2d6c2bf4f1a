"""A distributed workload's GPU use: GPU-hours allocated for every GPU of every rank, used from
every rank's samples, and `GET workloads/{id}/usage/` per rank (the pod that held the GPU names
its rank) and summed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from kube.labels import pod_name_rank
from tenants.models import Tenant
from tests.fixtures.factories import make_workload as make_row
from usage.models import GpuUsageRollup
from usage.services import samples_insert, usage_rollup

from .conftest import T0, make_workload, sample_row

pytestmark = pytest.mark.django_db

S = dt.timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _interval(settings):
    settings.PORTAL_USAGE_SCRAPE_INTERVAL = 15.0


def rank_sample(at, workload, pod: str, *, uuid: str, util: float, memory: int = 1000,
                node: str = "gpu-a100-1", index: int = 0) -> tuple:
    row = list(sample_row(at, workload, uuid=uuid, util=util, memory=memory, node=node,
                          index=index))
    row[8] = pod  # the pod that held the GPU
    return tuple(row)


def test_gpu_hours_count_every_gpu_of_every_rank(tenants, users, gpu_types):
    """2 nodes × 2 GPUs from 10:00:30 to 10:03:00: 4 GPUs allocated, each at 50 %."""
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=2, nodes=2,
                             kind="batch", launch_spec={"engine": "jobset"},
                             started_at=T0 + 30 * S, finished_at=T0 + 180 * S)
    pods = {0: f"{workload.object_name}-r-0-0-x1x2x", 1: f"{workload.object_name}-r-0-1-y3y4y"}
    rows = [rank_sample(T0 + t * S, workload, pods[rank], uuid=f"GPU-{rank}{gpu}", util=50.0,
                        node=f"gpu-a100-{rank + 1}", index=gpu)
            for rank in (0, 1) for gpu in (0, 1) for t in range(45, 181, 15)]
    assert samples_insert(rows=rows) == 40
    usage_rollup(since=T0, until=T0 + dt.timedelta(hours=1), now=T0 + dt.timedelta(days=1))
    total = GpuUsageRollup.objects.get(workload=workload, granularity="hour")
    assert total.gpu_count == 4
    assert total.gpu_seconds_allocated == 150.0 * 4  # 2.5 minutes × 4 GPUs (not 2)
    assert total.gpu_seconds_used == pytest.approx(150.0 * 4 / 2)


def test_the_usage_endpoint_per_rank_and_summed(login, gpu_types, as_user):
    login("researcher")
    now = timezone.now().replace(microsecond=0)
    workload = make_row(Tenant.objects.get(name="vision-lab"), "researcher", name="ddp",
                        template="pytorch-ddp", kind="batch", gpu_count=2, nodes=2,
                        launch_spec={"engine": "jobset"},
                        started_at=now - dt.timedelta(minutes=10))
    pods = {0: f"{workload.object_name}-r-0-0-x1x2x", 1: f"{workload.object_name}-r-0-1-y3y4y"}
    rows = []
    for i in range(3):
        at = now - dt.timedelta(seconds=15 * (2 - i))
        for rank, gpu, util in ((0, 0, 90.0), (0, 1, 70.0), (1, 0, 30.0), (1, 1, 10.0 + i)):
            rows.append(rank_sample(at, workload, pods[rank], uuid=f"GPU-{rank}{gpu}",
                                    util=util, memory=1000 * (rank + 1), index=gpu,
                                    node=f"gpu-a100-{rank + 1}"))
    samples_insert(rows=rows)
    body = as_user("researcher").get(f"/api/v1/workloads/{workload.pk}/usage/").json()
    assert (body["gpu_count"], body["nodes"], body["gpu_total"]) == (2, 2, 4)
    assert [r["rank"] for r in body["ranks"]] == [0, 1]
    rank0, rank1 = body["ranks"]
    assert rank0["util_avg"] == [80.0] * 3 and rank0["util_max"] == [90.0] * 3
    assert rank1["util_avg"] == [20.0, 20.5, 21.0] and rank1["memory_used_mib"] == [2000.0] * 3
    assert len(rank0["t"]) == 3 and rank0["t"] == body["sum"]["t"]
    # every GPU of every rank: (90 + 70 + 30 + 10…12) % → GPUs' worth of work
    assert body["sum"]["gpus_busy"] == [2.0, 2.01, 2.02]
    assert body["sum"]["memory_used_mib"] == [6000, 6000, 6000]
    assert body["sum"]["gpus"] == [4, 4, 4]


@pytest.mark.parametrize(("pod", "rank"), [
    ("wl-9-ddp-r-0-3-k2j4x", 3), ("wl-9-ddp-worker-1", 1), ("wl-9-ddp-launcher-7hx2q", "launcher"),
    ("wl-9-ddp-abc12", None), ("wl-99-ddp-r-0-3-k2j4x", None), ("wl-9-ddp-r-1-3-k2j4x", None)])
def test_a_pods_rank_from_its_name(pod, rank):
    assert pod_name_rank("wl-9-ddp", pod) == rank
