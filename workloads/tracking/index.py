"""What the tracker watches, and its view: an index of the portal's objects per workload id,
kept by list + watch (tracker.py)."""


from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kube.labels import LABEL_WORKLOAD_ID, MANAGED_BY_SELECTOR, PREFIX

from ..lifecycle import Observed
from ..models import Workload

State = Workload.State
Obj = dict[str, Any]

# kind → the TrackerCursor resource name; the order is the order of a relist
WATCHED = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments", "Service": "services",
           "Ingress": "ingresses", "Event": "events"}
PRIMARY = {"Job", "Deployment"}  # the object that is the workload (batch / service)
LIVE = (State.QUEUED, State.PENDING, State.RUNNING)  # states whose objects must exist
SELECTOR = MANAGED_BY_SELECTOR
OBJECT_NAME = re.compile(rf"^{PREFIX}-(\d+)(?:-|$)")
KUEUE_WORKLOAD_PREFIX = re.compile(r"^(?:job|pod|deployment)-")

VANISHED = "Its Kubernetes objects were deleted outside the portal."
EVENTS_PER_WORKLOAD = 30  # kept in memory for derivation (FailedCreate); all are stored in the DB
CHUNK = 500  # ids per database query
WATCH_RESTARTS = 3  # a stream the server ends early is re-opened at most this often per cycle
LOCK_KEY = "workloads-tracker-lock"


def workload_id_of(obj: Obj) -> int | None:
    """The workload an object belongs to: its label, or for an event the involved object's
    name (`wl-<id>-…`)."""
    if "involvedObject" in obj:
        involved = obj.get("involvedObject") or {}
        name = involved.get("name") or ""
        if involved.get("kind") == "Workload":
            # Kueue's Workload of a Job or pod: "job-<job name>-<hash>", "pod-<pod name>-<hash>"
            name = KUEUE_WORKLOAD_PREFIX.sub("", name)
        match = OBJECT_NAME.match(name)
        return int(match.group(1)) if match else None
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_WORKLOAD_ID, "")
    return int(value) if value.isdigit() else None


def _namespace(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _uid(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


class Index:
    """The current objects of the watched kinds, by workload id (ours only)."""

    def __init__(self) -> None:
        # kind → uid → (workload id or None, object)
        self.objects: dict[str, dict[str, tuple[int | None, Obj]]] = {k: {} for k in WATCHED}
        # workload id → kind → uid → object
        self.by_workload: dict[int, dict[str, dict[str, Obj]]] = defaultdict(
            lambda: defaultdict(dict))

    def put(self, kind: str, obj: Obj) -> int | None:
        uid = _uid(obj)
        self.remove(kind, obj)
        wid = workload_id_of(obj)
        if kind == "Event" and wid is None:
            return None  # not about a workload: not kept
        self.objects[kind][uid] = (wid, obj)
        if wid is not None:
            bucket = self.by_workload[wid][kind]
            bucket[uid] = obj
            if kind == "Event" and len(bucket) > EVENTS_PER_WORKLOAD:
                oldest = min(bucket, key=lambda u: bucket[u].get("lastTimestamp") or "")
                self.objects["Event"].pop(oldest, None)
                del bucket[oldest]
        return wid

    def remove(self, kind: str, obj: Obj) -> int | None:
        entry = self.objects[kind].pop(_uid(obj), None)
        if entry is None:
            return workload_id_of(obj)
        wid = entry[0]
        if wid is not None and wid in self.by_workload:
            self.by_workload[wid][kind].pop(_uid(obj), None)
            if not any(self.by_workload[wid].values()):
                del self.by_workload[wid]
        return wid

    def replace(self, kind: str, items: Iterable[Obj]) -> set[int]:
        """A relist: the kind's objects become `items`; returns every workload id touched."""
        touched = {wid for wid, _ in self.objects[kind].values() if wid is not None}
        for _, obj in list(self.objects[kind].values()):
            self.remove(kind, obj)
        for obj in items:
            wid = self.put(kind, obj)
            if wid is not None:
                touched.add(wid)
        return touched

    def observed(self, wid: int, kind: str, namespace: str) -> Observed:
        """The workload's objects in its own namespace (a look-alike elsewhere is an orphan)."""
        objects = self.by_workload.get(wid) or {}

        def of(k: str) -> list[Obj]:
            return [o for o in (objects.get(k) or {}).values() if _namespace(o) == namespace]

        jobs, deployments, services = of("Job"), of("Deployment"), of("Service")
        ingresses = of("Ingress")
        return Observed(kind=kind, pods=of("Pod"), job=jobs[0] if jobs else None,
                        deployment=deployments[0] if deployments else None,
                        service=services[0] if services else None,
                        ingress=ingresses[0] if ingresses else None, events=of("Event"))

    def top_level(self, wids: Iterable[int] | None = None) -> list[tuple[str, Obj]]:
        """Objects of ours that no other object owns (what deleting cleans up the rest)."""
        result = []
        ids = self.by_workload.keys() if wids is None else wids
        for wid in ids:
            for kind, objects in (self.by_workload.get(wid) or {}).items():
                if kind == "Event":
                    continue
                for obj in objects.values():
                    meta = obj.get("metadata") or {}
                    if not meta.get("ownerReferences") and not meta.get("deletionTimestamp"):
                        result.append((kind, obj))
        return result
