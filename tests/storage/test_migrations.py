"""The data migration that makes each tenant's home volume a project Volume named "home" on
the claim workloads have always mounted (gpu-portal-home: nothing on it is lost), with mount
rows for the workloads still running on it; and back. The storage accounting's first rows:
each volume that holds storage counts from its creation at its size today. Migrated on the
test's PostgreSQL database."""

from __future__ import annotations

import datetime as dt

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


def test_volumes_holding_storage_count_from_their_creation_at_their_size():
    after = latest()
    # every other app as it is now: only storage goes back
    old = migrate([node for node in after if node[0] != "storage"] + [("storage", "0002_datasets")])
    made, gone = dt.datetime(2025, 1, 1, tzinfo=dt.UTC), dt.datetime(2025, 2, 1, tzinfo=dt.UTC)
    try:
        lab = old.get_model("tenants", "Tenant").objects.create(
            keystone_project_id="p-lab", name="lab", namespace="gp-lab")
        ann = old.get_model("keystone", "User").objects.create(username="id-ann",
                                                               keystone_user_id="id-ann")
        Volume = old.get_model("storage", "Volume")
        volumes = {name: Volume.objects.create(tenant=lab, owner=ann, name=name, scope=scope,
                                               size_gib=size, state=state, capacity_gib=capacity,
                                               claim_name=f"v-{name}", deleted_at=deleted)
                   for name, scope, size, state, capacity, deleted in [
                       ("bound", "user", 30, "bound", 30, None),
                       ("shared", "project", 8, "failed", 8, None),  # was bound, then Lost
                       ("going", "user", 5, "bound", 5, gone),
                       ("pending", "user", 50, "pending", 0, None),
                       ("failed", "user", 70, "failed", 0, None)]}
        Volume.objects.update(created_at=made)
    finally:
        new = migrate(after)
    rows = new.get_model("storage", "VolumeSize").objects.order_by("volume_id", "since")
    assert [(r.volume_id, r.scope, r.size_gib, r.since) for r in rows] == [
        (volumes["bound"].pk, "user", 30, made), (volumes["shared"].pk, "project", 8, made),
        (volumes["going"].pk, "user", 5, made), (volumes["going"].pk, "user", 0, gone)]
