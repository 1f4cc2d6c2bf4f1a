"""Storage in the usage report: the GiB-days the volumes held in a period, from the rows that
storage's services write as a volume is first bound, grown and deleted (VolumeSize); per
tenant every volume, per user their own (`user` scope) volumes; another tenant's not counted;
a claim that never bound holds nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from storage.models import VolumeSize
from tests.support.volumes import volume_lived
from usage.models import GpuUsageRollup
from usage.selectors import STORAGE, report_columns, storage_total, usage_report

from .conftest import T0

pytestmark = pytest.mark.django_db

H, D = dt.timedelta(hours=1), dt.timedelta(days=1)
SINCE, UNTIL = T0 + 12 * H, T0 + 5 * D


@pytest.fixture
def volumes(tenants, users):
    """alpha: ann's `data` (10 GiB bound at +6h, 30 GiB from +1d6h, deleted at +3d6h), bob's
    project volume `shared` (4 GiB bound at +6h), ann's `stuck` (never bound, grown, deleted)
    and `late` (not bound yet); beta: bob's `other` (100 GiB bound at +6h)."""
    alpha, beta = tenants["alpha"], tenants["beta"]
    ann, bob = users["ann"], users["bob"]
    return {
        "data": volume_lived(alpha, ann, name="data", size_gib=10, made_at=T0,
                             bound_at=T0 + 6 * H, grown=[(T0 + D + 6 * H, 30)],
                             deleted_at=T0 + 3 * D + 6 * H),
        "shared": volume_lived(alpha, bob, name="shared", scope="project", size_gib=4,
                               made_at=T0, bound_at=T0 + 6 * H),
        "stuck": volume_lived(alpha, ann, name="stuck", size_gib=100, made_at=T0,
                              bound_at=None, grown=[(T0 + D, 120)], deleted_at=T0 + 2 * D),
        "late": volume_lived(alpha, ann, name="late", size_gib=50, made_at=T0 + D,
                             bound_at=None),
        "other": volume_lived(beta, bob, name="other", size_gib=100, made_at=T0,
                              bound_at=T0 + 6 * H),
    }


def report(group_by: str, sizes=None, since=SINCE, until=UNTIL):
    return usage_report(GpuUsageRollup.objects.none(), since=since, until=until,
                        group_by=group_by,
                        sizes=VolumeSize.objects.all() if sizes is None else sizes)


def test_a_volumes_sizes_are_recorded_from_binding_to_deletion(volumes):
    rows = VolumeSize.objects.filter(volume_id=volumes["data"])
    assert [(r.size_gib, r.since) for r in rows] == \
        [(10, T0 + 6 * H), (30, T0 + D + 6 * H), (0, T0 + 3 * D + 6 * H)]
    assert {(r.scope, r.owner.username, r.tenant.name) for r in rows} == {("user", "ann", "alpha")}
    # a claim that never bound held nothing: no row for it, grown or deleted
    assert not VolumeSize.objects.filter(volume_id__in=[volumes["stuck"], volumes["late"]])


def test_gib_days_per_tenant_count_every_volume_of_its_own(volumes):
    rows = report("tenant")
    # alpha: data 10 GiB × 0.75 d + 30 GiB × 2 d, shared 4 GiB × 4.5 d; beta: 100 GiB × 4.5 d
    assert [(r["tenant"], r[STORAGE]) for r in rows] == [("alpha", 85.5), ("beta", 450.0)]
    # tenants that used no GPU in the period are in the report for their storage alone
    assert rows[0]["gpu_hours_allocated"] == 0.0 and rows[0]["workloads"] == 0
    alpha = VolumeSize.objects.filter(tenant__name="alpha")
    assert [(r["tenant"], r[STORAGE]) for r in report("tenant", alpha)] == [("alpha", 85.5)]
    assert storage_total(alpha, since=SINCE, until=UNTIL) == pytest.approx(85.5)


def test_gib_days_per_user_count_their_own_volumes(volumes):
    alpha = VolumeSize.objects.filter(tenant__name="alpha")
    # bob's project volume is the project's, not his: he holds nothing of his own in alpha
    assert [(r["user_id"], r["user"], r[STORAGE]) for r in report("user", alpha)] == \
        [("ann", "ann", 67.5)]
    assert [(r["user_id"], r[STORAGE]) for r in report("user")] == \
        [("ann", 67.5), ("bob", 450.0)]


def test_periods_before_binding_and_after_deletion_hold_nothing_of_it(volumes):
    assert report("tenant", since=T0, until=T0 + 6 * H) == []
    late = report("user", since=T0 + 4 * D, until=T0 + 5 * D)
    assert [(r["user_id"], r[STORAGE]) for r in late] == [("bob", 100.0)]  # ann's data: gone
    assert storage_total(VolumeSize.objects.filter(tenant__name="alpha"), since=T0 + 4 * D,
                         until=T0 + 5 * D) == pytest.approx(4.0)


def test_no_storage_column_where_a_volume_has_no_such_group(volumes):
    assert [g for g in ("tenant", "user", "gpu_type", "workload", "day")
            if STORAGE in report_columns(g)] == ["tenant", "user"]
    assert report("gpu_type") == [] and report("day") == []
    assert storage_total(None, since=SINCE, until=UNTIL) is None
