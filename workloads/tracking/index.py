"""What the tracker watches, and which of the watched objects belong to which workload.

The objects themselves live in the reflectors' stores (kube/reflector.py), one per kind; this
index holds only their keys per workload id, kept by the reflectors' change callbacks, so that
one workload's objects are found without scanning a store."""


from __future__ import annotations

import re
import threading
from collections import defaultdict
from typing import Any

from kube.labels import (
    HOME_CLAIM_NAME,
    LABEL_WORKLOAD_ID,
    MANAGED_BY_SELECTOR,
    VOLUME_PREFIX,
    workload_id_of_name,
)
from kube.reflector import object_key

from ..models import Workload

State = Workload.State
Obj = dict[str, Any]

# kind → the TrackerCursor resource name
WATCHED = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments", "Service": "services",
           "Ingress": "ingresses", "Event": "events"}
# a distributed workload's group, watched too where the cluster serves its API (kube/engines.py):
# engine (launch spec) → the kind of its group, and that kind → its TrackerCursor resource
GROUP_KINDS = {"jobset": "JobSet", "mpi": "MPIJob"}
GROUP_WATCHED = {"JobSet": "jobsets", "MPIJob": "mpijobs"}
# the volumes' claims (storage/): watched for their phase, which reaches each Volume's state;
# they belong to no workload
CLAIM_KIND = "PersistentVolumeClaim"
CLAIMS = {CLAIM_KIND: "persistentvolumeclaims"}
RESOURCES = {**WATCHED, **GROUP_WATCHED, **CLAIMS}
# the object that is the workload: a service's Deployment, a batch workload's Job, a distributed
# one's JobSet or MPIJob (whose own Jobs carry JobSet's or the operator's labels, not ours)
PRIMARY = {"Job", "Deployment", *GROUP_WATCHED}
SELECTOR = MANAGED_BY_SELECTOR
# Kueue's Workload of a Job, a pod, a Deployment's pods, a JobSet, an MPIJob
KUEUE_WORKLOAD_PREFIX = re.compile(r"^(?:job|pod|deployment|jobset|mpijob)-")

VANISHED = "Its Kubernetes objects were deleted outside the portal."
CHUNK = 500  # ids per database query
LOCK_KEY = "workloads-tracker-lock"


def workload_id_of(obj: Obj) -> int | None:
    """The workload an object belongs to: its label, or for an event the involved object's
    name (`wl-<id>-…`)."""
    if "involvedObject" in obj:
        involved = obj.get("involvedObject") or {}
        name = involved.get("name") or ""
        if involved.get("kind") == "Workload":
            # Kueue's Workload of a Job, a pod or a group: "job-<job name>-<hash>",
            # "pod-<pod name>-<hash>", "jobset-<JobSet name>-<hash>", "mpijob-<MPIJob name>-…"
            name = KUEUE_WORKLOAD_PREFIX.sub("", name)
        return workload_id_of_name(name)
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_WORKLOAD_ID, "")
    return int(value) if value.isdigit() else None


def claim_of_event(event: Obj) -> tuple[str, str] | None:
    """(namespace, name) of the volume claim a Kubernetes event is about (the provisioner's
    ProvisioningFailed, ExternalProvisioning …), when it is one of the portal's claims."""
    involved = event.get("involvedObject") or {}
    name = involved.get("name") or ""
    if involved.get("kind") != CLAIM_KIND or not (
            name == HOME_CLAIM_NAME or name.startswith(f"{VOLUME_PREFIX}-")):
        return None
    return involved.get("namespace") or namespace_of(event), name


def namespace_of(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


class Index:
    """kind → key → workload id, and workload id → kind → keys (ours only). Thread-safe: the
    reflectors' threads write it, the tracker's worker reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[str, dict[str, int]] = defaultdict(dict)
        self._keys: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))

    def put(self, kind: str, obj: Obj) -> int | None:
        """The object is current: file it under its workload; that id (None: not ours)."""
        key, wid = object_key(obj), workload_id_of(obj)
        with self._lock:
            self._drop(kind, key)
            if wid is not None:
                self._owner[kind][key] = wid
                self._keys[wid][kind].add(key)
        return wid

    def remove(self, kind: str, obj: Obj) -> int | None:
        """The object is gone; the workload it was filed under (or would be)."""
        with self._lock:
            wid = self._drop(kind, object_key(obj))
        return wid if wid is not None else workload_id_of(obj)

    def _drop(self, kind: str, key: str) -> int | None:
        wid = self._owner[kind].pop(key, None)
        if wid is not None and wid in self._keys:
            self._keys[wid][kind].discard(key)
            if not any(self._keys[wid].values()):
                del self._keys[wid]
        return wid

    def keys(self, wid: int) -> dict[str, list[str]]:
        """kind → keys of the workload's objects now."""
        with self._lock:
            return {kind: list(keys) for kind, keys in (self._keys.get(wid) or {}).items()}

    def workloads(self) -> list[int]:
        with self._lock:
            return list(self._keys)
