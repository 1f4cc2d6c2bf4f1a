"""Volumes over HTTP: kubesim binds a claim as a dynamic provisioner would (a PV of its size,
bound both ways, Bound with its capacity), grows it where its class allows and refuses the
larger request elsewhere with the real 403, tells a missing class with ProvisioningFailed,
reclaims the PV with the claim, and counts claims in ResourceQuota; a claim that names its
volume (a dataset's pair) is bound as the PV controller binds a pre-bound pair."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.cluster_helpers import event_reasons, status_body
from tests.support.waiting import eventually


def claim(name: str, size: str, storage_class: str | None = None) -> dict:
    spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": spec}


def bound(core, ns: str, name: str):
    return eventually(lambda: (c := core.read_namespaced_persistent_volume_claim(name, ns))
                      .status.phase == "Bound" and c, message=f"{name} is not bound")


@pytest.fixture
def storage(kubesim):
    api = kubesim.api_client()
    yield client.StorageV1Api(api)
    api.close()


def test_a_claim_of_the_default_class_is_provisioned_grown_and_reclaimed(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_persistent_volume_claim(ns, claim("data", "10Gi"))
    got = bound(core, ns, "data")
    assert got.spec.storage_class_name == "standard"  # the default class, as admission sets it
    assert got.status.capacity == {"storage": "10Gi"}
    pv = core.read_persistent_volume(got.spec.volume_name)
    assert (pv.spec.claim_ref.name, pv.spec.claim_ref.namespace) == ("data", ns)
    assert pv.spec.persistent_volume_reclaim_policy == "Delete" and pv.status.phase == "Bound"
    assert "ProvisioningSucceeded" in [reason for reason, _ in event_reasons(core, ns, "data")]
    core.patch_namespaced_persistent_volume_claim(
        "data", ns, {"spec": {"resources": {"requests": {"storage": "20Gi"}}}})
    eventually(lambda: core.read_namespaced_persistent_volume_claim("data", ns).status.capacity
               == {"storage": "20Gi"}, message="the claim did not grow")
    assert core.read_persistent_volume(pv.metadata.name).spec.capacity == {"storage": "20Gi"}
    # the answer unread: kubesim answers a Status where the real server, whose claims carry
    # the pvc-protection finalizer, answers the claim (kubesim/README.md's differences)
    core.delete_namespaced_persistent_volume_claim("data", ns, _preload_content=False)

    def reclaimed() -> bool:
        try:
            core.read_persistent_volume(pv.metadata.name)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(reclaimed, message="the PV outlived its claim")


def test_a_class_without_expansion_refuses_a_larger_request(core, storage, kube_namespace):
    ns, name = kube_namespace, f"fixed-{uuid.uuid4().hex[:6]}"
    storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": name},
                                  "provisioner": "kubesim.io/provisioner"})
    try:
        core.create_namespaced_persistent_volume_claim(ns, claim("fixed", "1Gi", name))
        bound(core, ns, "fixed")
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_persistent_volume_claim(
                "fixed", ns, {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        assert err.value.status == 403
        assert status_body(err.value)["message"] == (
            'persistentvolumeclaims "fixed" is forbidden: only dynamically provisioned pvc can '
            "be resized and the storageclass that provisions the pvc must support resize")
    finally:
        core.delete_namespaced_persistent_volume_claim("fixed", ns, _preload_content=False)
        storage.delete_storage_class(name, _preload_content=False)


def test_a_missing_class_leaves_the_claim_pending_with_the_provisioners_words(core,
                                                                              kube_namespace):
    ns = kube_namespace
    core.create_namespaced_persistent_volume_claim(ns, claim("lost", "1Gi", "no-such-class"))
    reasons = eventually(lambda: (got := event_reasons(core, ns, "lost")) and got,
                         message="no event about the claim")
    assert ("ProvisioningFailed", 'storageclass.storage.k8s.io "no-such-class" not found') \
        in reasons
    assert core.read_namespaced_persistent_volume_claim("lost", ns).status.phase == "Pending"


def test_claims_count_against_the_namespaces_storage_quota(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_resource_quota(ns, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "storage"},
        "spec": {"hard": {"requests.storage": "15Gi", "persistentvolumeclaims": "5"}}})
    core.create_namespaced_persistent_volume_claim(ns, claim("one", "10Gi"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_persistent_volume_claim(ns, claim("two", "10Gi"))
    assert err.value.status == 403
    assert status_body(err.value)["message"] == (
        'persistentvolumeclaims "two" is forbidden: exceeded quota: storage, requested: '
        "requests.storage=10Gi, used: requests.storage=10Gi, limited: requests.storage=15Gi")


def static_volume(name: str, size: str, claim_ref: dict | None) -> dict:
    spec: dict = {"capacity": {"storage": size}, "accessModes": ["ReadOnlyMany"],
                  "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                  "nfs": {"server": "nfs.example.org", "path": "/exports", "readOnly": True}}
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": spec}


def named_claim(name: str, volume: str, size: str = "1Gi") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "",
                     "volumeName": volume, "resources": {"requests": {"storage": size}}}}


def test_a_claim_naming_its_volume_is_bound_as_the_pv_controller_binds_a_pre_bound_pair(
        core, kube_namespace):
    """A dataset's pair (storage/manifests.py): the volume pre-bound to the claim by its
    claimRef, made before or after the claim; a volume another claim holds, or one too small,
    is not taken; deleting the claim leaves a kept volume Released."""
    ns, tag = kube_namespace, uuid.uuid4().hex[:6]
    names = [f"ds-{tag}-{suffix}" for suffix in ("early", "late", "other", "small")]
    try:
        core.create_persistent_volume(static_volume(names[0], "150Gi", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
            "name": "early"}))
        core.create_namespaced_persistent_volume_claim(ns, named_claim("early", names[0]))
        early = bound(core, ns, "early")
        assert (early.status.capacity, early.status.access_modes) == (
            {"storage": "150Gi"}, ["ReadOnlyMany"])
        pv = core.read_persistent_volume(names[0])
        assert pv.status.phase == "Bound" and pv.spec.claim_ref.uid == early.metadata.uid

        core.create_namespaced_persistent_volume_claim(ns, named_claim("late", names[1]))
        core.create_persistent_volume(static_volume(names[1], "10Gi", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
            "name": "late"}))
        bound(core, ns, "late")  # the volume made after its claim binds it then

        core.create_persistent_volume(static_volume(names[2], "10Gi", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
            "name": "someone-else"}))
        core.create_namespaced_persistent_volume_claim(ns, named_claim("thief", names[2]))
        core.create_persistent_volume(static_volume(names[3], "1Gi", None))
        core.create_namespaced_persistent_volume_claim(ns, named_claim("greedy", names[3],
                                                                       "5Gi"))
        bound(core, ns, "late")  # the controller has been through the queue since
        for name in ("thief", "greedy"):
            assert core.read_namespaced_persistent_volume_claim(name, ns).status.phase \
                != "Bound", name

        core.delete_namespaced_persistent_volume_claim("early", ns, _preload_content=False)
        eventually(lambda: core.read_persistent_volume(names[0]).status.phase == "Released",
                   message="the kept volume was not Released")
    finally:
        for name in names:
            try:
                core.delete_persistent_volume(name, _preload_content=False)
            except ApiException as exc:
                if exc.status != 404:
                    raise
