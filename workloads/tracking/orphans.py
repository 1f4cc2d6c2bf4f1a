"""Orphan cleanup: objects labelled as the portal's that no live workload owns are deleted."""


from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

from django.utils import timezone

from kube.client import Kube, KubeRefused
from kube.reflector import object_key
from tenants.models import Tenant

from ..manifests import BATCH
from ..models import Workload
from .index import PRIMARY, Obj, State, namespace_of, workload_id_of
from .states import WorkloadRow, workload_rows

log = logging.getLogger(__name__)


def top_level(objects: Iterable[tuple[str, Obj]]) -> list[tuple[str, Obj]]:
    """Those of the objects (kind, object) that no other object owns and that are not being
    deleted (deleting them cleans up the rest); events are no one's to delete."""
    result = []
    for kind, obj in objects:
        meta = obj.get("metadata") or {}
        if (kind != "Event" and not meta.get("ownerReferences")
                and not meta.get("deletionTimestamp")):
            result.append((kind, obj))
    return result


class OrphanCollector:
    """Deletes what no live workload owns, each object once (its DELETED event follows, or a
    list tries again)."""

    def __init__(self, kube: Kube, *, failed_service_grace_seconds: float) -> None:
        self.kube = kube
        self.failed_service_grace = failed_service_grace_seconds
        self._deleted: set[str] = set()  # keys of orphans already deleted
        self.requests = 0  # DELETE requests made
        self.errors = 0  # deletes refused

    def collect(self, objects: Iterable[tuple[str, Obj]]) -> int:
        """Delete our objects that no live workload owns: an id the database does not know, a
        workload stopped or deleted, a service failed for longer than the grace (its Deployment
        would hold GPUs the portal no longer counts), or a copy in another namespace than its
        workload's. Only in
        namespaces of this portal's tenants, so a second portal (or a test) sharing the cluster
        is left alone. Jobs of finished batch workloads stay: ttlSecondsAfterFinished removes
        them, and their logs stay readable until then. `objects` are (kind, object) of ours;
        returns how many were deleted."""
        # an object of ours without a workload's id is no workload's (a project's file
        # server: files/manifests.py), and not this collector's to judge
        candidates = [(kind, obj) for kind, obj in top_level(objects)
                      if object_key(obj) not in self._deleted
                      and workload_id_of(obj) is not None]
        if not candidates:
            return 0
        tenant_namespaces = set(Tenant.objects.filter(
            namespace__in={namespace_of(obj) for _, obj in candidates})
            .values_list("namespace", flat=True))
        candidates = [(k, o) for k, o in candidates if namespace_of(o) in tenant_namespaces]
        rows = workload_rows({wid for _, o in candidates if (wid := workload_id_of(o)) is not None})
        failed_before = timezone.now() - dt.timedelta(seconds=self.failed_service_grace)
        deleted = 0
        for kind, obj in candidates:
            row = rows.get(workload_id_of(obj))  # type: ignore[arg-type]
            why = _orphan_reason(row, namespace_of(obj), failed_before)
            if why is None:
                continue
            meta = obj["metadata"]
            self._deleted.add(object_key(obj))  # once: its DELETED event follows, or a relist retries
            try:
                found = self.kube.delete(kind, meta["name"], meta["namespace"])
                self.requests += 1
                if kind in PRIMARY:  # its Secret (a Jupyter token) has the same name
                    self.kube.delete("Secret", meta["name"], meta["namespace"])
                    self.requests += 1
                if kind == "MPIJob":  # and an MPIJob's NetworkPolicy (not owned by it)
                    self.kube.delete("NetworkPolicy", meta["name"], meta["namespace"])
                    self.requests += 1
            except KubeRefused as exc:  # e.g. RBAC: say so, and carry on with the others
                log.error("could not delete orphan %s %s/%s: %s", kind, meta["namespace"],
                          meta["name"], exc)
                self.errors += 1
                continue
            if not found:
                # already gone: usually a stop task removed it and its DELETED event is still on
                # its way on another watch stream (the load test saw this after every stop)
                log.debug("orphan %s %s/%s was already gone", kind, meta["namespace"],
                          meta["name"])
                continue
            log.warning("deleted orphan %s %s/%s: %s", kind, meta["namespace"], meta["name"], why)
            deleted += 1
        return deleted


def _orphan_reason(row: WorkloadRow | None, namespace: str,
                   failed_before: dt.datetime) -> str | None:
    if row is None:
        return "no workload with this id"
    if row["tenant__namespace"] != namespace:
        return f"its workload lives in {row['tenant__namespace']}"
    if row["state"] == State.STOPPED:
        return "its workload is stopped"
    if row["deleted_at"] is not None and row["state"] in Workload.FINAL_STATES:
        return "its workload was deleted"
    # a failed service's pod would keep holding GPUs the portal no longer counts; it stays a
    # while first, so that the researcher can read why it crashed
    if (row["state"] == State.FAILED and row["kind"] != BATCH
            and (row["finished_at"] is None or row["finished_at"] < failed_before)):
        return "its workload failed"
    return None
