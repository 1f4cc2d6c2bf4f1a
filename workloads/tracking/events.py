"""Kubernetes events of the portal's workloads → WorkloadEvent rows."""


from __future__ import annotations

import logging
from collections import defaultdict

from django.utils import timezone

from kube.reflector import object_key

from ..kueue_reason import redact
from ..lifecycle import parse_time
from ..models import Workload, WorkloadEvent
from .index import CHUNK, Obj, namespace_of, workload_id_of

log = logging.getLogger(__name__)


class EventRecorder:
    """Records the Kubernetes events of the portal's workloads, remembering which counts it
    has already written (so a relist's replay writes nothing)."""

    def __init__(self) -> None:
        self._recorded: dict[str, int] = {}  # event uid → count already in the database

    def record(self, events: list[Obj]) -> int:
        """Kubernetes events of our workloads become WorkloadEvent rows, one per event uid,
        its count and time kept current; how many rows were created or updated."""
        written = 0
        fresh = [e for e in events
                 if self._recorded.get(object_key(e)) != int(e.get("count") or 1)]
        by_workload: dict[int, list[Obj]] = defaultdict(list)
        for event in fresh:
            wid = workload_id_of(event)
            if wid is not None:
                by_workload[wid].append(event)
        if not by_workload:
            return 0
        namespaces = dict(Workload.objects.filter(pk__in=list(by_workload))
                          .values_list("id", "tenant__namespace"))
        ours = [(wid, e) for wid, evs in by_workload.items() for e in evs
                if namespaces.get(wid) and namespace_of(e) == namespaces[wid]]

        def message(wid: int, event: Obj) -> str:
            text: str = event.get("message") or ""
            if (event.get("involvedObject") or {}).get("kind") == "Workload":
                # Kueue's text can name other tenants' queues and workloads
                text = redact(text, frozenset({namespaces[wid]}))
            return text

        for start in range(0, len(ours), CHUNK):
            chunk = ours[start:start + CHUNK]
            known = dict(WorkloadEvent.objects.filter(uid__in=[object_key(e) for _, e in chunk])
                         .values_list("uid", "count"))
            new = []
            for wid, event in chunk:
                uid, count = object_key(event), int(event.get("count") or 1)
                at = parse_time(event.get("lastTimestamp") or event.get("eventTime")
                                or event.get("firstTimestamp")) or timezone.now()
                if uid not in known:
                    source = ((event.get("source") or {}).get("component")
                              or event.get("reportingComponent") or "kubernetes")
                    new.append(WorkloadEvent(
                        workload_id=wid, uid=uid, at=at, count=count,
                        type=(event.get("type") or "Normal")[:16],
                        reason=(event.get("reason") or "")[:128],
                        message=message(wid, event), source=source[:64]))
                elif known[uid] != count:
                    WorkloadEvent.objects.filter(uid=uid).update(
                        count=count, at=at, message=message(wid, event))
                    written += 1
                self._recorded[uid] = count
            if new:
                # a concurrent writer of the same uid (another tracker) is not an error
                WorkloadEvent.objects.bulk_create(new, ignore_conflicts=True)
                written += len(new)
        return written
