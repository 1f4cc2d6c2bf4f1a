"""The data migration that makes each tenant's home volume a project Volume named "home" on
the claim workloads have always mounted (gpu-portal-home: nothing on it is lost), with mount
rows for the workloads still running on it; and back. Migrated on the test's PostgreSQL
database."""

from __future__ import annotations

import pytest

from tests.support.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)

# the users' table as it is now (its columns are all there however far back workloads goes)
BEFORE = [("workloads", "0015_workloadmount"), ("keystone", "0002_user_keyed_by_keystone_id")]


def workload(apps, tenant, owner, *, name: str, use_home: bool, state: str):
    return apps.get_model("workloads", "Workload").objects.create(
        tenant=tenant, owner=owner, name=name, kind="service", image="jupyter:1",
        template=apps.get_model("catalogue", "Template").objects.get(slug="jupyter"),
        gpu_type=apps.get_model("catalogue", "GpuType").objects.get_or_create(
            slug="a100", defaults={"name": "A100"})[0],
        gpu_count=1, cpu=4, memory_gb=16, use_home=use_home, state=state)


def test_the_home_claim_becomes_the_project_volume_home_and_goes_back(settings):
    settings.PORTAL_HOME_VOLUME_SIZE = "50Gi"
    settings.PORTAL_HOME_STORAGE_CLASS = "cephfs"
    after = latest()
    old = migrate(BEFORE)
    try:
        Tenant = old.get_model("tenants", "Tenant")
        User = old.get_model("keystone", "User")
        lab = Tenant.objects.create(keystone_project_id="p-lab", name="lab", namespace="gp-lab")
        plain = Tenant.objects.create(keystone_project_id="p-plain", name="plain",
                                      namespace="gp-plain")
        ann = User.objects.create(username="id-ann", keystone_user_id="id-ann")
        bob = User.objects.create(username="id-bob", keystone_user_id="id-bob")
        first = workload(old, lab, ann, name="first", use_home=True, state="succeeded")
        running = workload(old, lab, bob, name="running", use_home=True, state="running")
        workload(old, lab, bob, name="no-home", use_home=False, state="running")
        workload(old, plain, ann, name="plain", use_home=False, state="running")
    finally:
        new = migrate(after)
    Volume = new.get_model("storage", "Volume")
    home = Volume.objects.get()
    assert (home.tenant.name, home.name, home.scope, home.owner.username, home.claim_name,
            home.size_gib, home.storage_class, home.state) == \
        ("lab", "home", "project", "id-ann", "gpu-portal-home", 50, "cephfs", "pending")
    mounts = new.get_model("workloads", "WorkloadMount").objects.all()
    assert [(m.workload_id, m.volume_id, m.path, m.claim_name) for m in mounts] == \
        [(running.pk, home.pk, "/home/portal", "gpu-portal-home")]
    assert first.pk != running.pk

    back = migrate(BEFORE)
    try:
        assert not back.get_model("storage", "Volume").objects.exists()
        assert not back.get_model("workloads", "WorkloadMount").objects.exists()
    finally:
        again = migrate(after)
    assert again.get_model("storage", "Volume").objects.get().claim_name == "gpu-portal-home"
