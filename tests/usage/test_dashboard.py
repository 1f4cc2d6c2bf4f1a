"""The admin's GPU dashboard counts as `used` only the GPUs that running workloads hold, and
shows GPUs busy outside the portal's workloads apart (a dashboard once said 3.77 GPUs "used" against 2
allocated A100s, 188.5 %, and 0.47 on V100 with none allocated)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from usage.admin_views import busy_outside, gpu_type_rows, tenant_allocations
from usage.models import GpuDevice
from usage.services import samples_insert
from workloads.models import Workload

from .conftest import make_workload, sample_row

pytestmark = pytest.mark.django_db


def node(name: str, gputype: str) -> dict:
    return {"metadata": {"name": name, "labels": {"gputype": gputype}},
            "status": {"capacity": {"nvidia.com/gpu": "8"},
                       "allocatable": {"nvidia.com/gpu": "8"}}}


NODES = [node("gpu-a100-1", "a100"), node("gpu-a100-2", "a100"), node("gpu-v100-1", "v100")]


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def busy_cluster(gpu_types, tenants, users, now):
    """Five minutes of samples: a running 2-GPU notebook (whose pod moved once), an A100
    workload and a V100 job that ended a minute ago, and GPUs busy outside the portal."""
    notebook = make_workload(tenants["alpha"], users["ann"], gpu_count=2, name="notebook",
                             started_at=now - dt.timedelta(minutes=30))
    ended = make_workload(tenants["beta"], users["bob"], gpu_count=2, name="ended",
                          started_at=now - dt.timedelta(minutes=20),
                          finished_at=now - dt.timedelta(minutes=1))
    Workload.objects.filter(pk=ended.pk).update(state=Workload.State.STOPPED)
    job = make_workload(tenants["beta"], users["bob"], gpu_type="v100", name="job",
                        started_at=now - dt.timedelta(minutes=6),
                        finished_at=now - dt.timedelta(minutes=2))
    rows = []
    for step in range(20):  # every 15 s over the last five minutes
        at = now - dt.timedelta(seconds=15 * step)
        rows += [sample_row(at, notebook, uuid="GPU-A", util=90.0, node="gpu-a100-1", index=0),
                 sample_row(at, notebook, uuid="GPU-B", util=10.0, node="gpu-a100-1", index=1)]
        if step >= 16:  # its pod ran on another GPU four minutes ago
            rows.append(sample_row(at, notebook, uuid="GPU-C", util=100.0, node="gpu-a100-2",
                                   index=0))
        if step >= 4:  # the ended workload, until a minute ago
            rows += [sample_row(at, ended, uuid="GPU-D", util=100.0, node="gpu-a100-1", index=2),
                     sample_row(at, ended, uuid="GPU-E", util=100.0, node="gpu-a100-1", index=3)]
        if step >= 8:
            rows.append(sample_row(at, job, uuid="GPU-V", util=47.0, node="gpu-v100-1", index=0))
    samples_insert(rows=rows)
    last = {"last_seen": now, "model": "A100"}
    GpuDevice.objects.create(uuid="GPU-A", node="gpu-a100-1", index=0, last_util=90.0,
                             last_workload=notebook, **last)
    # the ended workload's GPU still reports (its last pod is going away)
    GpuDevice.objects.create(uuid="GPU-D", node="gpu-a100-1", index=2, last_util=100.0,
                             last_workload=ended, **last)
    # a pod the portal did not launch
    GpuDevice.objects.create(uuid="GPU-F", node="gpu-a100-2", index=5, last_util=55.0,
                             last_namespace="kube-system", last_pod="burn-in-xyz", **last)
    GpuDevice.objects.create(uuid="GPU-G", node="gpu-a100-2", index=6, last_util=0.0, **last)
    # busy, but its last report is older than the window
    GpuDevice.objects.create(uuid="GPU-H", node="gpu-a100-2", index=7, last_util=80.0,
                             model="A100", last_seen=now - dt.timedelta(minutes=10))
    return notebook


def test_used_counts_only_the_gpus_running_workloads_hold(busy_cluster, now):
    rows = {r.gpu_type.slug: r for r in gpu_type_rows(NODES, now)}

    a100 = rows["a100"]
    assert a100.allocated == 2
    # the notebook's two GPUs: (90 % + 10 %) / 100; not the GPU its pod left, not the
    # ended workload's two GPUs at 100 %
    assert a100.used == 1.0
    assert a100.used_percent == 50.0
    assert a100.used <= a100.allocated
    v100 = rows["v100"]
    assert v100.allocated == 0 and v100.used == 0.0 and v100.used_percent is None


def test_gpus_busy_outside_the_portal_are_shown_apart(busy_cluster, now):
    outside = busy_outside(now)
    assert [d.uuid for d in outside] == ["GPU-D", "GPU-F"]
    rows = {r.gpu_type.slug: r for r in gpu_type_rows(NODES, now, outside)}
    assert rows["a100"].outside == 2 and rows["v100"].outside == 0
    # without the cluster's nodes the GPU type of a device is unknown: said, not guessed
    unknown = gpu_type_rows(None, now, outside)
    assert unknown and all(r.outside is None for r in unknown)


def test_a_tenants_mean_utilisation_is_its_running_gpus(busy_cluster, now, tenants):
    by_tenant = {t["tenant"]: t for t in tenant_allocations(now)}
    assert by_tenant["alpha"]["util_avg"] == 50.0
    assert "beta" not in by_tenant  # nothing of beta's runs


def test_the_page_shows_both(busy_cluster, login, settings):
    settings.KUBECONFIG = "/nonexistent/kubeconfig"  # no cluster: the list still shows
    page = login("admin").get("/admin/gpus/").content.decode()
    assert 'data-col="used">1.00<' in page and 'data-col="used-percent">50.0%<' in page
    assert 'id="gpus-busy-outside"' in page
    assert "kube-system/burn-in-xyz" in page and 'data-gpu="gpu-a100-1/2"' in page
