"""Orphan cleanup: objects labelled as the portal's that no live workload owns are deleted."""


from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from kube.client import KubeRefused
from tenants.models import Tenant

from ..manifests import BATCH
from ..models import Workload
from .index import (
    PRIMARY,
    State,
    _namespace,
    _uid,
    workload_id_of,
)

log = logging.getLogger(__name__)


class OrphanCleanup:
    """The Tracker's part that deletes orphans (tracker.py)."""

    def _delete_orphans(self, wids: Iterable[int] | None) -> None:
        """Delete our objects that no live workload owns: an id the database does not know, a
        workload stopped or deleted, a service failed for longer than the grace (its Deployment
        would hold GPUs the portal no longer counts), or a copy in another namespace than its
        workload's. Only in
        namespaces of this portal's tenants, so a second portal (or a test) sharing the cluster
        is left alone. Jobs of finished batch workloads stay: ttlSecondsAfterFinished removes
        them, and their logs stay readable until then."""
        candidates = [(kind, obj) for kind, obj in self.index.top_level(wids)
                      if _uid(obj) not in self._deleted]
        if not candidates:
            return
        tenant_namespaces = set(Tenant.objects.filter(
            namespace__in={_namespace(obj) for _, obj in candidates})
            .values_list("namespace", flat=True))
        candidates = [(k, o) for k, o in candidates if _namespace(o) in tenant_namespaces]
        rows = self._rows({wid for _, o in candidates if (wid := workload_id_of(o)) is not None})
        failed_before = timezone.now() - dt.timedelta(seconds=self.failed_service_grace)
        for kind, obj in candidates:
            row = rows.get(workload_id_of(obj))  # type: ignore[arg-type]
            why = _orphan_reason(row, _namespace(obj), failed_before)
            if why is None:
                continue
            meta = obj["metadata"]
            self._deleted.add(_uid(obj))  # once: its DELETED event follows, or a relist retries
            try:
                found = self.kube.delete(kind, meta["name"], meta["namespace"])
                self.stats.requests += 1
                if kind in PRIMARY:  # its Secret (a Jupyter token) has the same name
                    self.kube.delete("Secret", meta["name"], meta["namespace"])
                    self.stats.requests += 1
            except KubeRefused as exc:  # e.g. RBAC: say so, and carry on with the others
                log.error("could not delete orphan %s %s/%s: %s", kind, meta["namespace"],
                          meta["name"], exc)
                self.stats.errors += 1
                continue
            if not found:
                # already gone: usually a stop task removed it and its DELETED event is still on
                # its way on another watch stream (the load test saw this after every stop)
                log.debug("orphan %s %s/%s was already gone", kind, meta["namespace"],
                          meta["name"])
                continue
            log.warning("deleted orphan %s %s/%s: %s", kind, meta["namespace"], meta["name"], why)
            self.stats.orphans += 1


def _orphan_reason(row: dict[str, Any] | None, namespace: str,
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
