"""A dataset's objects in one project, as dicts: a cluster-scoped PersistentVolume
(ReadOnlyMany, kept, no class, pre-bound to the project's claim, its source read-only) and that
claim (no class, naming the volume); each kind's source (NFS, CSI, S3 through the site's CSI
driver in Mountpoint's shape, a named PersistentVolume's copied); valid against the Kubernetes
schema; and a pod that mounts one does so read-only, on every rank of a group."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from storage.manifests import (
    DatasetClaimSpec,
    copied_volume_source,
    dataset_volume_source,
    make_dataset_claim,
    make_dataset_volume,
)
from tests.support.manifests import DDP, JUPYTER, MPIJOB
from workloads.manifests import PodMount, workload_objects

NFS = {"server": "nfs.example.org", "path": "/exports/imagenet"}
SPEC = DatasetClaimSpec(dataset_id=7, namespace="tenant-vision-lab", project_id="p-1",
                        size_gib=150, volume_source={"nfs": {**NFS, "readOnly": True}})
LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/project-id": "p-1",
          "gpu-portal.io/dataset-id": "7"}


def test_the_volume_is_read_only_kept_classless_and_pre_bound_to_the_projects_claim():
    assert make_dataset_volume(SPEC) == {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "gpu-portal-dataset-7-tenant-vision-lab", "labels": LABELS},
        "spec": {"capacity": {"storage": "150Gi"}, "accessModes": ["ReadOnlyMany"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "volumeMode": "Filesystem",
                 "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "namespace": "tenant-vision-lab", "name": "gpu-portal-dataset-7"},
                 "nfs": {**NFS, "readOnly": True}}}


def test_the_claim_names_the_volume_and_asks_for_no_class():
    assert make_dataset_claim(SPEC) == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "gpu-portal-dataset-7", "namespace": "tenant-vision-lab",
                     "labels": LABELS},
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "",
                 "volumeName": "gpu-portal-dataset-7-tenant-vision-lab",
                 "resources": {"requests": {"storage": "1Gi"}}}}


def source(kind: str, given: dict) -> dict:
    return dataset_volume_source(kind, given, volume_name="gpu-portal-dataset-7-ns",
                                 s3_driver="s3.csi.aws.com")


def test_each_kinds_source():
    assert source("nfs", NFS) == {"nfs": {**NFS, "readOnly": True}}
    assert source("csi", {"driver": "lustre.csi.example.com", "volume_handle": "fs-1",
                          "volume_attributes": {"mgs": "10.0.0.1@tcp"}}) == {
        "csi": {"driver": "lustre.csi.example.com", "volumeHandle": "fs-1", "readOnly": True,
                "volumeAttributes": {"mgs": "10.0.0.1@tcp"}}}
    # Mountpoint for S3's driver: the bucket an attribute, the rest mount options; the handle
    # is this volume's own (the driver wants one per volume)
    assert source("s3", {"endpoint": "https://s3.example.org", "bucket": "corpora",
                         "prefix": "text/", "region": "eu-1"}) == {
        "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "gpu-portal-dataset-7-ns",
                "readOnly": True, "volumeAttributes": {"bucketName": "corpora"}},
        "mountOptions": ["read-only", "endpoint-url https://s3.example.org", "prefix text/",
                         "region eu-1"]}


def test_a_named_volumes_source_is_copied_without_its_binding_class_or_size():
    existing = {"metadata": {"name": "lustre-scratch"},
                "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
                         "claimRef": {"namespace": "x", "name": "y"},
                         "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "slow",
                         "mountOptions": ["nfsvers=4.1"],
                         "nfs": {"server": "10.0.0.9", "path": "/lustre"}}}
    copied = copied_volume_source(existing)
    assert copied == {"mountOptions": ["nfsvers=4.1"],
                      "nfs": {"server": "10.0.0.9", "path": "/lustre"}}
    assert source("pv", {"persistent_volume": "lustre-scratch", "spec": copied}) == {
        "mountOptions": ["nfsvers=4.1"],
        "nfs": {"server": "10.0.0.9", "path": "/lustre", "readOnly": True}}


@pytest.mark.parametrize("kind", ["nfs", "s3"])
def test_valid_against_the_kubernetes_schema(kind):
    given = NFS if kind == "nfs" else {"endpoint": "https://s3.example.org", "bucket": "b-1"}
    spec = dataclasses.replace(SPEC, volume_source=source(kind, given))
    version = kubernetes_validate.utils.latest_version()
    for obj in (make_dataset_volume(spec), make_dataset_claim(spec)):
        kubernetes_validate.validate(obj, version, strict=True)


def test_what_cannot_be_a_datasets_volume_is_refused():
    with pytest.raises(ValueError):
        dataclasses.replace(SPEC, size_gib=0)
    with pytest.raises(ValueError):
        dataclasses.replace(SPEC, volume_source={})
    with pytest.raises(ValueError):
        source("hostpath", {})


@pytest.mark.parametrize("spec", [JUPYTER, DDP, MPIJOB], ids=["service", "jobset", "mpijob"])
def test_every_pod_mounts_a_dataset_read_only(spec):
    """Read-only twice: the pod's claim volume and the container's mount."""
    mounted = dataclasses.replace(spec, mounts=(PodMount(claim="gpu-portal-dataset-7",
                                                         path="/datasets/imagenet",
                                                         read_only=True),))
    pods = []
    for obj in workload_objects(mounted):
        body = obj.get("spec") or {}
        if obj["kind"] in ("Deployment", "Job"):
            pods.append(body["template"])
        elif obj["kind"] == "JobSet":
            pods.append(body["replicatedJobs"][0]["template"]["spec"]["template"])
        elif obj["kind"] == "MPIJob":
            pods += [replica["template"] for replica in body["mpiReplicaSpecs"].values()]
    assert pods
    for pod in pods:
        assert {"name": "mount-0", "persistentVolumeClaim": {
            "claimName": "gpu-portal-dataset-7", "readOnly": True}} in pod["spec"]["volumes"]
        assert {"name": "mount-0", "mountPath": "/datasets/imagenet", "readOnly": True} in \
            pod["spec"]["containers"][0]["volumeMounts"]
