"""Pure make_* functions for a volume's objects: its PersistentVolumeClaim (no client, no
settings; tested as dicts)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kube.labels import (
    LABEL_OWNER_ID,
    LABEL_PROJECT_ID,
    LABEL_VOLUME_ID,
    MANAGED_BY,
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
