"""A workload on a MIG instance whose exporter has memory and no utilisation (the NVML agent:
NVML has none per instance): its samples store the memory and no utilisation; rollups, reports,
the chart and the admin's dashboard read what there is and invent nothing; idle culling never
judges it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from tenants.models import Quota, Tenant
from tests.fixtures.factories import make_workload
from tests.support.database import demo_shared_gpu_types
from usage.charts import MEMORY_ONLY_NOTE
from usage.culling import idle_window, workload_idle_check
from usage.models import GpuUsageRollup, WorkloadIdle
from usage.selectors import usage_report
from usage.services import samples_insert, usage_rollup
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_a_mig_slice(login, gpu_types) -> Workload:
    """A notebook on an A100's 1g.10gb slice for the last 30 minutes, a memory-only sample of
    it every 15 s for the last 10, 900 MiB used of 9.9 GiB; its tenant culls after 2 idle
    minutes under 5 %."""
    demo_shared_gpu_types(gpu_types)
    login("researcher")  # records vision-lab
    tenant = Tenant.objects.get(name="vision-lab")
    Quota.objects.filter(tenant=tenant).update(idle_threshold_percent=5, idle_minutes=2,
                                               idle_action=Quota.IdleAction.STOP,
                                               idle_grace_minutes=1)
    now = timezone.now().replace(microsecond=0)
    workload = make_workload(tenant, "researcher", gpu_type="a100-1g-10gb",
                             started_at=now - dt.timedelta(minutes=30))
    samples_insert(rows=[
        (now - dt.timedelta(seconds=15 * i), "gpu-a100-mig-1", 0, "GPU-a100", "7", workload.pk,
         tenant.pk, tenant.namespace, f"{workload.object_name}-0", None, 900, 9984, None, None,
         0, 0, "") for i in range(40)])
    return Workload.objects.select_related("tenant__quota").get(pk=workload.pk)


def test_rollups_keep_the_memory_and_no_utilisation(on_a_mig_slice):
    now = timezone.now()
    usage_rollup(since=now - dt.timedelta(minutes=40), until=now, now=now)
    rows = GpuUsageRollup.objects.filter(workload=on_a_mig_slice, samples__gt=0)
    assert rows.exists()
    for row in rows:
        assert row.util_avg is None and row.util_max is None
        assert row.memory_avg_mib == 900 and row.memory_max_mib == 900
        assert row.gpu_seconds_used == 0  # what it computed is not known: none is counted
    hours = GpuUsageRollup.objects.filter(workload=on_a_mig_slice, granularity="hour")
    # its allocation counts 1/7 of a GPU, whatever its utilisation
    allocated = sum(row.gpu_seconds_allocated for row in hours)
    assert 0 < allocated <= 30 * 60 / 7 + 1
    report = usage_report(GpuUsageRollup.objects.filter(workload=on_a_mig_slice),
                          since=now - dt.timedelta(hours=2), until=now + dt.timedelta(hours=1),
                          group_by="tenant")
    assert report[0]["util_avg"] is None and report[0]["util_max"] is None


def test_the_chart_says_memory_only(on_a_mig_slice, as_user, login):
    data = as_user("researcher").get(f"/workloads/{on_a_mig_slice.pk}/gpu-usage/?minutes=15").json()
    assert data["memory_only"] is True and data["scope_note"] == MEMORY_ONLY_NOTE
    assert data["scope_note"].startswith("no utilisation per MIG slice: memory only")
    assert set(data["util_avg"]) == {None} and set(data["memory_used_mib"]) == {900.0}
    # the admin's dashboard counts no use for it (unknown, not nought), and does not fail
    assert login("admin").get("/admin/gpus/").status_code == 200


def test_idle_culling_never_judges_a_workload_with_memory_only(on_a_mig_slice):
    now = timezone.now()
    window = idle_window(on_a_mig_slice, on_a_mig_slice.tenant.quota, now=now)
    assert window.covered and window.samples > 0  # a full window of samples …
    assert not window.judged and not window.idle  # … none of which says what it computed
    assert workload_idle_check(on_a_mig_slice, now=now) == ""
    assert not WorkloadIdle.objects.filter(workload=on_a_mig_slice,
                                           warned_at__isnull=False).exists()
