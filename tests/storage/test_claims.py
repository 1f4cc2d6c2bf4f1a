"""A volume's claim in the cluster (kubesim, over HTTP with the official client): made by its
task under its deterministic name (again: nothing new), bound as a dynamic provisioner binds
it, grown where its class allows, deleted with its volume; the tracker's list + watch of the
claims brings each phase, and the provisioner's ProvisioningFailed, to the volume's state; the
namespace's ResourceQuota counts the claims' storage."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import TestCase

from kube.client import Kube, KubeRefused
from storage.models import StorageClass, Volume
from storage.services import (
    VolumeInvalid,
    storage_class_set,
    volume_claim_apply,
    volume_claim_delete,
    volume_create,
    volume_delete,
    volume_grow,
)
from tenants.manifests import QUOTA_NAME
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.waiting import eventually
from workloads.tracking.tracker import Tracker

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create(username="id-ann", keystone_user_id="id-ann",
                                           name="ann")


@pytest.fixture
def lab(tenant, owner):
    """A tenant whose namespace is in kubesim, with room for 40 GiB in 3 volumes."""
    quota_update(tenant=tenant, acting_user=None, changes={"storage_gib": 40, "volumes": 3})
    tenant_reconcile(tenant_id=tenant.pk)
    StorageClass.objects.create(name="standard", expandable=True, is_default=True)
    return tenant


def made(tenant, owner, **fields) -> Volume:
    with TestCase.captureOnCommitCallbacks(execute=False):
        return volume_create(tenant=tenant, user=owner, **{"name": "data", "size_gib": 10,
                                                             "scope": "user", **fields})


def claim(volume: Volume) -> dict | None:
    return Kube().get("PersistentVolumeClaim", volume.claim_name, volume.tenant.namespace)


def tracked(volume: Volume, check) -> Volume:
    """The volume once the tracker (its list + watch of claims and events) has written what
    `check` waits for."""
    def seen():
        Tracker().run_for(0.3)
        volume.refresh_from_db()
        assert check(volume), (volume.state, volume.reason, volume.capacity_gib)
        return volume
    return eventually(seen, timeout=20)


def test_a_claim_is_made_bound_and_its_phase_reaches_the_volume(lab, owner):
    volume = made(lab, owner)
    assert volume_claim_apply(volume_id=volume.pk) == "created"
    assert volume_claim_apply(volume_id=volume.pk) == "nothing"  # idempotent: 409 is there
    got = eventually(lambda: (c := claim(volume)) and c["status"].get("phase") == "Bound" and c,
                     message="the claim is not bound")
    labels = got["metadata"]["labels"]
    assert labels["gpu-portal.io/volume-id"] == str(volume.pk)
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert got["spec"]["storageClassName"] == "standard"
    assert got["status"]["capacity"] == {"storage": "10Gi"}
    pv = Kube().get("PersistentVolume", got["spec"]["volumeName"])
    assert pv["spec"]["claimRef"]["name"] == volume.claim_name
    assert pv["spec"]["capacity"] == {"storage": "10Gi"}
    volume = tracked(volume, lambda v: v.state == Volume.State.BOUND)
    assert (volume.reason, volume.capacity_gib) == ("", 10)


def test_a_volume_grows_in_place_where_its_class_allows(lab, owner):
    volume = made(lab, owner)
    volume_claim_apply(volume_id=volume.pk)
    tracked(volume, lambda v: v.state == Volume.State.BOUND)
    with TestCase.captureOnCommitCallbacks(execute=False):
        volume_grow(volume=volume, user=owner, size_gib=25)
    assert volume_claim_apply(volume_id=volume.pk) == "resized"
    eventually(lambda: claim(volume)["status"]["capacity"] == {"storage": "25Gi"},
               message="the claim did not grow")
    assert tracked(volume, lambda v: v.capacity_gib == 25).state == Volume.State.BOUND


def test_kubesim_refuses_to_grow_a_claim_whose_class_cannot(lab, owner):
    Kube().create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "fixed-size"}, "provisioner": "kubesim.io/provisioner"})
    StorageClass.objects.create(name="fixed-size")
    volume = made(lab, owner, storage_class="fixed-size")
    volume_claim_apply(volume_id=volume.pk)
    eventually(lambda: claim(volume)["status"].get("phase") == "Bound")
    with pytest.raises(KubeRefused, match="storageclass that provisions the pvc must support"):
        Kube().patch("PersistentVolumeClaim", volume.claim_name,
                     {"spec": {"resources": {"requests": {"storage": "20Gi"}}}},
                     volume.tenant.namespace)


def test_a_class_the_cluster_lacks_fails_the_volume_with_the_provisioners_words(lab, owner):
    StorageClass.objects.create(name="missing")
    volume = made(lab, owner, storage_class="missing")
    volume_claim_apply(volume_id=volume.pk)
    volume = tracked(volume, lambda v: v.state == Volume.State.FAILED)
    assert volume.reason == \
        'ProvisioningFailed: storageclass.storage.k8s.io "missing" not found'
    assert claim(volume)["status"]["phase"] == "Pending"


def test_deleting_a_volume_deletes_its_claim_its_volume_and_then_its_row(lab, owner):
    volume = made(lab, owner)
    volume_claim_apply(volume_id=volume.pk)
    bound = eventually(lambda: (c := claim(volume)) and c["status"].get("phase") == "Bound" and c)
    with TestCase.captureOnCommitCallbacks(execute=False):
        volume_delete(volume=volume, user=owner)
    assert volume_claim_delete(volume_id=volume.pk) is True
    assert not Volume.objects.filter(pk=volume.pk).exists()
    eventually(lambda: claim(volume) is None, message="the claim is still there")
    eventually(lambda: Kube().get("PersistentVolume", bound["spec"]["volumeName"]) is None,
               message="its PersistentVolume was not reclaimed")


def test_deleting_a_volume_stops_the_projects_file_server_first(lab, owner, monkeypatch):
    """The server's pod mounts every claim of the project: the claim is not released while it
    runs. The stop is sent by name, before the claim's deletion."""
    sent = []
    monkeypatch.setattr("files.tasks.file_server_stop_task.delay",
                        lambda namespace: sent.append(("stop files", namespace)))
    monkeypatch.setattr("storage.tasks.volume_claim_delete_task.delay",
                        lambda pk: sent.append(("delete claim", pk)))
    volume = made(lab, owner)
    with TestCase.captureOnCommitCallbacks(execute=True):
        volume_delete(volume=volume, user=owner)
    assert sent == [("stop files", lab.namespace), ("delete claim", volume.pk)]


def test_the_namespaces_quota_counts_the_claims(lab, owner):
    quota = Kube().get("ResourceQuota", QUOTA_NAME, lab.namespace)
    assert quota["spec"]["hard"]["requests.storage"] == "40Gi"
    assert quota["spec"]["hard"]["persistentvolumeclaims"] == "3"
    too_big = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "by-hand", "namespace": lab.namespace},
               "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "41Gi"}}}}
    with pytest.raises(KubeRefused, match="exceeded quota.*requests.storage=41Gi"):
        Kube().create(too_big)


def test_an_admin_offers_only_classes_the_cluster_has(cluster, owner):
    offered = storage_class_set(user=owner, name="standard", description="fast SSD",
                                expandable=True, is_default=True)
    assert (offered.expandable, offered.is_default) == (True, True)
    with pytest.raises(VolumeInvalid, match="no StorageClass 'nope'"):
        storage_class_set(user=owner, name="nope")
    Kube().create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "fixed-size"}, "provisioner": "kubesim.io/provisioner"})
    with pytest.raises(VolumeInvalid) as refused:
        storage_class_set(user=owner, name="fixed-size", expandable=True)
    assert "does not allow volume expansion" in refused.value.errors["expandable"][0]
