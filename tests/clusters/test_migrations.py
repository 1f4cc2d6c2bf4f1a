"""The clusters' first migration: the home cluster made from the settings (PORTAL_CLUSTER_NAME)
and every workload recorded on it, so that a site of one cluster sees no change; and back.
Migrated on the test's PostgreSQL database."""

from __future__ import annotations

import pytest

from tests.support.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)

# before the clusters app: the users' table as it is now, the workloads before their cluster
BEFORE = [("workloads", "0017_workloadmount_dataset"), ("tenants", "0012_storage_class_quota"),
          ("clusters", None), ("keystone", "0002_user_keyed_by_keystone_id")]


def test_the_home_cluster_comes_from_the_settings_and_every_workload_runs_there(settings):
    settings.PORTAL_CLUSTER_NAME = "mn-2"
    after = latest()
    old = migrate(BEFORE)
    try:
        tenant = old.get_model("tenants", "Tenant").objects.create(
            keystone_project_id="p-lab", name="lab", namespace="gp-lab")
        owner = old.get_model("keystone", "User").objects.create(username="id-ann",
                                                                 keystone_user_id="id-ann")
        workload = old.get_model("workloads", "Workload").objects.create(
            tenant=tenant, owner=owner, name="before", kind="batch", image="train:1",
            template=old.get_model("catalogue", "Template").objects.get(slug="custom"),
            gpu_type=old.get_model("catalogue", "GpuType").objects.get_or_create(
                slug="a100", defaults={"name": "A100"})[0],
            gpu_count=1, cpu=4, memory_gb=16, state="running")
    finally:
        new = migrate(after)
    home = new.get_model("clusters", "Cluster").objects.get()
    assert (home.name, home.home, home.enabled, home.kubeconfig_path) == ("mn-2", True, True, "")
    assert new.get_model("workloads", "Workload").objects.get(pk=workload.pk).cluster == "mn-2"
    # a project limited to no cluster may use every one
    assert not new.get_model("tenants", "Tenant").objects.get(pk=tenant.pk).clusters.exists()
