"""Pure make_* functions for a volume's objects (its PersistentVolumeClaim) and a dataset's in
one project (a PersistentVolume and its claim): no client, no settings; tested as dicts."""

from __future__ import annotations

import dataclasses
from typing import Any

from kube.labels import (
    LABEL_DATASET_ID,
    LABEL_OWNER_ID,
    LABEL_PROJECT_ID,
    LABEL_VOLUME_ID,
    MANAGED_BY,
    dataset_claim_name,
    dataset_volume_name,
    label_value,
)

Manifest = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ClaimSpec:
    volume_id: int
    name: str  # the claim's name (kube.labels.volume_claim_name, or the home volume's)
    namespace: str
    project_id: str
    owner_id: str  # the Keystone user id of its owner (a project volume's: its creator)
    size_gib: int
    storage_class: str = ""  # empty: the cluster's default class
    # ReadWriteMany: a project's workloads run on different GPU nodes at once, and a
    # ReadWriteOnce volume would keep every pod but the first stuck on another node; a site
    # whose classes have no RWX (local disks) sets ReadWriteOnce and accepts that limit
    access_mode: str = "ReadWriteMany"

    def __post_init__(self) -> None:
        if self.size_gib < 1:
            raise ValueError("a volume holds at least 1 GiB")


def claim_labels(spec: ClaimSpec) -> dict[str, str]:
    return {**MANAGED_BY, LABEL_PROJECT_ID: label_value(spec.project_id),
            LABEL_VOLUME_ID: str(spec.volume_id), LABEL_OWNER_ID: label_value(spec.owner_id)}


def storage_request(size_gib: int) -> str:
    return f"{size_gib}Gi"


def make_volume_claim(spec: ClaimSpec) -> Manifest:
    """The volume's PersistentVolumeClaim, in its project's namespace."""
    claim_spec: Manifest = {"accessModes": [spec.access_mode],
                            "resources": {"requests": {"storage": storage_request(spec.size_gib)}}}
    if spec.storage_class:
        claim_spec["storageClassName"] = spec.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": spec.name, "namespace": spec.namespace,
                         "labels": claim_labels(spec)},
            "spec": claim_spec}


def make_claim_resize(size_gib: int) -> Manifest:
    """The merge patch that grows a claim (the cluster expands it where its class allows)."""
    return {"spec": {"resources": {"requests": {"storage": storage_request(size_gib)}}}}


# --- datasets -------------------------------------------------------------------------------
# Pod Security "restricted" admits no inline nfs (or other) volume in a pod, only claims, CSI
# ephemeral volumes and the like: a dataset reaches a project's pods as a PersistentVolume of
# its own (cluster-scoped, pre-bound by its claimRef to the project's claim, so no other claim
# can take it) and that claim, which the pods mount read-only.
DATASET_ACCESS_MODE = "ReadOnlyMany"
# what a dataset's claim asks for: the least, whatever the dataset's size (the volume holds
# size_gib); the namespace's ResourceQuota leaves room for one such claim per dataset open to
# the project (storage_allowance_of)
DATASET_CLAIM_GIB = 1
# the source fields that can say read-only themselves, beside the pod's readOnly
READ_ONLY_SOURCES = ("nfs", "csi", "cephfs", "rbd", "iscsi", "fc", "azureFile")


@dataclasses.dataclass(frozen=True)
class DatasetClaimSpec:
    dataset_id: int
    namespace: str
    project_id: str
    size_gib: int
    # the PersistentVolume's spec fields that say where the data is ({"nfs": …}, {"csi": …,
    # "mountOptions": […]}, or those copied from a named PersistentVolume): dataset_volume_source
    volume_source: Manifest

    def __post_init__(self) -> None:
        if self.size_gib < DATASET_CLAIM_GIB:
            raise ValueError(f"a dataset holds at least {DATASET_CLAIM_GIB} GiB")
        if not self.volume_source:
            raise ValueError("a dataset's volume needs a source")

    @property
    def claim_name(self) -> str:
        return dataset_claim_name(self.dataset_id)

    @property
    def volume_name(self) -> str:
        return dataset_volume_name(self.dataset_id, self.namespace)


def dataset_volume_source(kind: str, source: Manifest, *, volume_name: str,
                          s3_driver: str) -> Manifest:
    """The PersistentVolume's source for a dataset of `kind` (storage/validation.py's
    `source`), read-only wherever the source can say so. An S3 bucket is mounted by
    `s3_driver` in the shape of Mountpoint for S3's driver: the bucket in volumeAttributes,
    prefix, endpoint and region as mount options, and a volumeHandle unique to this volume."""
    if kind == "nfs":
        return {"nfs": {"server": source["server"], "path": source["path"], "readOnly": True}}
    if kind == "csi":
        csi: Manifest = {"driver": source["driver"], "volumeHandle": source["volume_handle"],
                         "readOnly": True}
        if source.get("volume_attributes"):
            csi["volumeAttributes"] = dict(source["volume_attributes"])
        return {"csi": csi}
    if kind == "s3":
        options = ["read-only", f"endpoint-url {source['endpoint']}"]
        if source.get("prefix"):
            options.append(f"prefix {source['prefix']}")
        if source.get("region"):
            options.append(f"region {source['region']}")
        return {"csi": {"driver": s3_driver, "volumeHandle": volume_name, "readOnly": True,
                        "volumeAttributes": {"bucketName": source["bucket"]}},
                "mountOptions": options}
    if kind == "pv":
        copied = {key: (dict(value, readOnly=True) if key in READ_ONLY_SOURCES
                        and isinstance(value, dict) else value)
                  for key, value in (source.get("spec") or {}).items()}
        return copied
    raise ValueError(f"no volume source for a dataset of kind {kind!r}")


# what a named PersistentVolume's copy leaves behind: the fields this portal sets itself
PV_OWN_FIELDS = ("capacity", "accessModes", "claimRef", "persistentVolumeReclaimPolicy",
                 "storageClassName", "volumeMode", "volumeAttributesClassName")


def copied_volume_source(volume: Manifest) -> Manifest:
    """What a dataset copies of an existing PersistentVolume's spec: where its data is (its
    source, mount options, node affinity), not its binding, class or size."""
    return {key: value for key, value in (volume.get("spec") or {}).items()
            if key not in PV_OWN_FIELDS}


def dataset_labels(spec: DatasetClaimSpec) -> dict[str, str]:
    return {**MANAGED_BY, LABEL_PROJECT_ID: label_value(spec.project_id),
            LABEL_DATASET_ID: str(spec.dataset_id)}


def make_dataset_volume(spec: DatasetClaimSpec) -> Manifest:
    """The dataset's PersistentVolume for one project: ReadOnlyMany, kept (Retain: deleting
    it never touches the data), no class (no provisioner takes it), pre-bound to the
    project's claim."""
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": spec.volume_name, "labels": dataset_labels(spec)},
            "spec": {"capacity": {"storage": storage_request(spec.size_gib)},
                     "accessModes": [DATASET_ACCESS_MODE],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "storageClassName": "", "volumeMode": "Filesystem",
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "namespace": spec.namespace, "name": spec.claim_name},
                     **spec.volume_source}}


def make_dataset_claim(spec: DatasetClaimSpec) -> Manifest:
    """The project's claim on it: named by the dataset, asking for no class ("": never the
    default class, which would not match the volume) and for that volume by name."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": spec.claim_name, "namespace": spec.namespace,
                         "labels": dataset_labels(spec)},
            "spec": {"accessModes": [DATASET_ACCESS_MODE], "storageClassName": "",
                     "volumeName": spec.volume_name,
                     "resources": {"requests": {"storage": storage_request(DATASET_CLAIM_GIB)}}}}
