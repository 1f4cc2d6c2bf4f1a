"""The storage quota within a storage class on the real control plane: the namespace's
ResourceQuota, written by the portal's ServiceAccount, carries the per-class keys, the real
API server fills their use and refuses a claim of the class beyond them (its words, naming the
class's key), and takes them away again when the quota drops them. Admission's part runs on
kubesim (tests/storage/test_class_quota.py)."""

from __future__ import annotations

import pytest

from kube.client import Kube, KubeRefused
from tenants.manifests import QUOTA_NAME
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.provisioning import tenant  # noqa: F401 - a fixture
from tests.support.waiting import eventually

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]

PREFIX = "fast-ssd.storageclass.storage.k8s.io"


def claim(namespace: str, name: str, size: str, storage_class: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def test_the_per_class_keys_are_the_real_api_servers_to_enforce(cluster, tenant):  # noqa: F811
    quota_update(tenant=tenant, acting_user=None, changes={
        "storage_gib": 100, "volumes": 10,
        "storage_by_class": {"fast-ssd": {"storage_gib": 5, "volumes": 1}}})
    assert tenant_reconcile(tenant_id=tenant.pk).changed  # as the portal's ServiceAccount
    admin = Kube(cluster.api_client())

    def used() -> dict:
        quota = admin.get("ResourceQuota", QUOTA_NAME, tenant.namespace)
        assert quota["spec"]["hard"][f"{PREFIX}/requests.storage"] == "5Gi"
        assert quota["spec"]["hard"][f"{PREFIX}/persistentvolumeclaims"] == "1"
        status = quota.get("status") or {}
        assert f"{PREFIX}/requests.storage" in (status.get("used") or {}), status
        return status["used"]

    eventually(used, timeout=60, message="the quota controller did not count the class")
    with pytest.raises(KubeRefused, match=rf"exceeded quota: {QUOTA_NAME}, requested: "
                                          rf"{PREFIX}/requests.storage=6Gi"):
        admin.create(claim(tenant.namespace, "too-big", "6Gi", "fast-ssd"))
    admin.create(claim(tenant.namespace, "fits", "5Gi", "fast-ssd"))
    with pytest.raises(KubeRefused, match=rf"{PREFIX}/persistentvolumeclaims"):
        admin.create(claim(tenant.namespace, "one-more", "1Gi", "fast-ssd"))
    admin.create(claim(tenant.namespace, "other-class", "6Gi", "lustre"))  # not bounded there

    quota_update(tenant=tenant, acting_user=None, changes={"storage_by_class": {}})
    tenant_reconcile(tenant_id=tenant.pk)
    hard = admin.get("ResourceQuota", QUOTA_NAME, tenant.namespace)["spec"]["hard"]
    assert not [key for key in hard if key.startswith(PREFIX)]
