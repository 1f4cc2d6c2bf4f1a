"""The data migration that turns the quota's derived columns (reserved_gpus, withheld_gpus,
queue_held_reason) into QuotaAdjustment rows, and back. Migrated on the test's PostgreSQL
database."""

from __future__ import annotations

import pytest

from tests.support.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("tenants", "0009_quota_withheld_gpus")]


def quota(apps, name: str, **columns):
    Tenant = apps.get_model("tenants", "Tenant")
    tenant = Tenant.objects.create(keystone_project_id=f"p-{name}", name=name,
                                   namespace=f"gp-mig-{name}")
    return apps.get_model("tenants", "Quota").objects.create(tenant=tenant, **columns)


def test_the_columns_become_rows_and_come_back():
    after = latest()
    old = migrate(BEFORE)
    try:
        GpuType = old.get_model("catalogue", "GpuType")
        for slug in ("a100", "v100"):
            GpuType.objects.get_or_create(slug=slug, defaults={"name": slug})
        quota(old, "lab", reserved_gpus={"a100": 4}, withheld_gpus={"a100": 2, "v100": 0},
              queue_held_reason="GPU-hour budget: lab has used 12 of its 10 GPU-hours")
        quota(old, "plain")
    finally:
        new = migrate(after)
    rows = new.get_model("tenants", "QuotaAdjustment").objects.order_by("source")
    assert [(r.quota.tenant.name, r.source, r.kind, r.gpu_type and r.gpu_type.slug, r.gpus)
            for r in rows] == [("lab", "budget_hold", "hold", None, 0),
                               ("lab", "maintenance", "delta", "a100", -2),
                               ("lab", "reservation", "delta", "a100", 4)]
    assert rows[0].reason.startswith("GPU-hour budget: lab has used")

    back = migrate(BEFORE)
    try:
        lab = back.get_model("tenants", "Quota").objects.get(tenant__name="lab")
        assert (lab.reserved_gpus, lab.withheld_gpus) == ({"a100": 4}, {"a100": 2})
        assert lab.queue_held_reason.startswith("GPU-hour budget: lab has used")
        plain = back.get_model("tenants", "Quota").objects.get(tenant__name="plain")
        assert (plain.reserved_gpus, plain.withheld_gpus, plain.queue_held_reason) == \
            ({}, {}, "")
    finally:
        migrate(after)
