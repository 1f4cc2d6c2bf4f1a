"""The storage quota within a storage class: the namespace's ResourceQuota carries the API
server's per-class keys (a claim of the class made by other means is refused by the API server
too), and the portal's admission refuses a volume beyond the class's GiB or count (403
quota_exceeded, naming the class) in the same locked transaction as the quota in all; the
admin's page and `gpuctl quota` show it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase

from kube.client import Kube, KubeRefused
from storage.models import StorageClass
from storage.services import StorageQuotaExceeded, volume_create, volume_grow
from tenants.manifests import QUOTA_NAME
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.pages import admin  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

CLASS_STORAGE = "standard.storageclass.storage.k8s.io/requests.storage"
CLASS_CLAIMS = "standard.storageclass.storage.k8s.io/persistentvolumeclaims"


@pytest.fixture
def owner(db):
    return get_user_model().objects.create(username="id-ann", keystone_user_id="id-ann",
                                           name="ann")


@pytest.fixture
def lab(tenant, owner):
    """40 GiB in 5 volumes in all; within the class `standard`, 15 GiB in 2."""
    quota_update(tenant=tenant, acting_user=None, changes={
        "storage_gib": 40, "volumes": 5,
        "storage_by_class": {"standard": {"storage_gib": 15, "volumes": 2}}})
    tenant_reconcile(tenant_id=tenant.pk)
    StorageClass.objects.create(name="standard", expandable=True, is_default=True)
    StorageClass.objects.create(name="archive", description="tape")
    return tenant


def made(tenant, owner, name: str, size: int, storage_class: str = "standard"):
    with TestCase.captureOnCommitCallbacks(execute=False):
        return volume_create(tenant=tenant, user=owner, name=name, size_gib=size, scope="user",
                             storage_class=storage_class)


def test_the_resource_quota_carries_the_per_class_keys_and_the_api_server_holds_to_them(
        lab, owner):
    hard = Kube().get("ResourceQuota", QUOTA_NAME, lab.namespace)["spec"]["hard"]
    assert (hard[CLASS_STORAGE], hard[CLASS_CLAIMS]) == ("15Gi", "2")
    assert (hard["requests.storage"], hard["persistentvolumeclaims"]) == ("40Gi", "5")
    too_big = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "by-hand", "namespace": lab.namespace},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                        "resources": {"requests": {"storage": "16Gi"}}}}
    with pytest.raises(KubeRefused, match=r"exceeded quota.*" + CLASS_STORAGE + "=16Gi"):
        Kube().create(too_big)
    # without them, the keys go at the next reconcile
    quota_update(tenant=lab, acting_user=None, changes={"storage_by_class": {}})
    tenant_reconcile(tenant_id=lab.pk)
    hard = Kube().get("ResourceQuota", QUOTA_NAME, lab.namespace)["spec"]["hard"]
    assert CLASS_STORAGE not in hard and CLASS_CLAIMS not in hard


def test_admission_refuses_beyond_the_class_and_names_it(lab, owner):
    made(lab, owner, "one", 10)
    with pytest.raises(StorageQuotaExceeded, match="10 of 15 GiB of the storage class standard"):
        made(lab, owner, "two", 10)
    small = made(lab, owner, "two", 5)
    with pytest.raises(StorageQuotaExceeded, match="2 of 2 volumes allowed in the storage class "
                                                   "standard"):
        made(lab, owner, "three", 1)
    with pytest.raises(StorageQuotaExceeded, match="of the storage class standard"):
        volume_grow(volume=small, user=owner, size_gib=6)
    # another class is bounded only by the quota in all
    made(lab, owner, "cold", 20, storage_class="archive")
    with pytest.raises(StorageQuotaExceeded, match="uses 35 of 40 GiB"):
        made(lab, owner, "colder", 6, storage_class="archive")


def test_the_api_answers_403_quota_exceeded_naming_the_class(login, gpu_types, cluster,
                                                             project_token):
    login("researcher")
    from tenants.models import Tenant

    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes={
        "storage_by_class": {"standard": {"storage_gib": 5}}})
    StorageClass.objects.create(name="standard", is_default=True)
    client = Client(HTTP_X_AUTH_TOKEN=project_token("researcher", "vision-lab"))
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = client.post("/api/v1/volumes/", {"name": "big", "size_gib": 6},
                               content_type="application/json")
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "quota_exceeded"
    assert "storage class standard" in response.json()["detail"]


def test_an_admin_sets_it_on_the_tenant_page(admin):  # noqa: F811
    from tenants.models import Tenant

    vision = Tenant.objects.get(name="vision-lab")
    page = admin.get(f"/admin/tenants/{vision.pk}/").content.decode()
    assert 'name="storage_by_class"' in page
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = admin.post(f"/admin/tenants/{vision.pk}/", {
            "storage_gib": "300", "storage_by_class": "fast-ssd=200/5\nlustre=/3\n"})
    assert response.status_code == 302, response.content.decode()[:2000]
    vision.quota.refresh_from_db()
    assert vision.quota.storage_gib == 300
    assert vision.quota.storage_by_class() == {"fast-ssd": {"storage_gib": 200, "volumes": 5},
                                               "lustre": {"storage_gib": None, "volumes": 3}}
    page = admin.get(f"/admin/tenants/{vision.pk}/").content.decode()
    assert "fast-ssd=200/5\nlustre=/3" in page
    refused = admin.post(f"/admin/tenants/{vision.pk}/", {"storage_by_class": "fast=lots/1"})
    assert "fast: A whole number" in refused.content.decode()  # the page again, with the error
    assert "fast" not in vision.quota.storage_by_class()
