"""Deployment controller: one ReplicaSet per pod template, named by its pod-template-hash.

A template change creates a new ReplicaSet (next revision) with the desired replicas and
scales the old ones to zero at once; that is coarser than a rolling update, but the end
state, the names, the events and the status fields are the real ones. Status conditions:
Available (MinimumReplicasAvailable / MinimumReplicasUnavailable), Progressing
(NewReplicaSetCreated, ReplicaSetUpdated, NewReplicaSetAvailable, ProgressDeadlineExceeded)
and ReplicaFailure copied from a ReplicaSet that cannot create its pods.
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kubesim.cluster import controller_of, owner_ref, remove_condition, set_condition
from kubesim.controllers.common import condition, omit_zero
from kubesim.errors import ApiError
from kubesim.resources import Obj, by_kind
from kubesim.store import clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

DEPLOYMENT = by_kind("Deployment")
REPLICASET = by_kind("ReplicaSet")
COMPONENT = "deployment-controller"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"

Key = tuple[str, str]


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """FNV-1a 32 of the template, spelled with the API machinery's 'safe' alphabet."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += collision_count.to_bytes(4, "little")
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(h))


def _resolve(value: object, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    if not isinstance(value, int | float | str):  # (JSON's: null, a list …)
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def max_unavailable(deployment: Obj) -> int:
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate" or replicas == 0:
        return 0
    rolling = strategy.get("rollingUpdate") or {}
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, False)
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas, True)
    if unavailable == 0 and surge == 0:
        unavailable = 1
    return min(unavailable, replicas)


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


class DeploymentController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("deployments", self.reconcile)

    def on_deployment(self, event: str, deployment: Obj) -> None:
        key = (deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        if event == "DELETED":
            self.queue.forget(key)
        else:
            self.queue.add(key)

    def on_replicaset(self, event: str, rs: Obj) -> None:
        ref = controller_of(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            self.queue.add((rs["metadata"]["namespace"], ref.get("name", "")))

    def owned(self, deployment: Obj) -> list[Obj]:
        out = []
        for _, ns, name in self.cluster.index.owned(deployment["metadata"]["uid"], REPLICASET):
            rs = self.cluster.peek(REPLICASET, ns, name)
            if rs is not None:
                out.append(rs)
        return out

    def reconcile(self, key: Key) -> None:
        d = self.cluster.peek(DEPLOYMENT, *key)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        template = clone(spec.get("template") or {})
        (template.setdefault("metadata", {}).setdefault("labels", {})).pop(HASH_LABEL, None)
        collisions = int((d.get("status") or {}).get("collisionCount") or 0)
        digest = template_hash(template, collisions)
        all_rs = self.owned(d)
        new_rs = next((rs for rs in all_rs
                       if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == digest), None)
        old_rs = [rs for rs in all_rs if rs is not new_rs]
        created_now = False
        if spec.get("paused"):
            self._update_status(d, new_rs, all_rs, False)
            return
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        # Old ReplicaSets go to zero first (at once for RollingUpdate; a Recreate waits below).
        for rs in old_rs:
            current = int((rs.get("spec") or {}).get("replicas", 0))
            if current:
                self._scale(d, rs, 0)
        old_pods_left = any(int((rs.get("status") or {}).get("replicas") or 0) for rs in old_rs)
        revision = 1 + max((int((rs["metadata"].get("annotations") or {}).get(REVISION, "0") or 0)
                            for rs in old_rs), default=0)
        if new_rs is None and not (recreate and old_pods_left):
            new_rs = self._create_rs(d, template, digest, replicas, revision)
            created_now = new_rs is not None
            if new_rs is None:
                return  # a hash collision: the status update re-queues us
        elif new_rs is not None:
            annotations = new_rs["metadata"].get("annotations") or {}
            if int((new_rs.get("spec") or {}).get("replicas", 0)) != replicas:
                self._scale(d, new_rs, replicas)
            elif old_rs and int(annotations.get(REVISION, "0") or 0) < revision - 1:
                # A rollback to an older template: it becomes the newest revision.
                self._annotate(new_rs, {REVISION: str(revision)})
        self._cleanup(d, old_rs)
        if new_rs is not None:
            d = self._sync_revision(d, new_rs)
        self._update_status(d, new_rs, self.owned(d), created_now)

    def _sync_revision(self, d: Obj, new_rs: Obj) -> Obj:
        """The Deployment carries its newest ReplicaSet's revision annotation, as the real
        controller writes it (`kubectl rollout history` reads it there)."""
        revision = (new_rs["metadata"].get("annotations") or {}).get(REVISION)
        current = self.cluster.peek(DEPLOYMENT, d["metadata"]["namespace"],
                                    d["metadata"]["name"]) or d
        if revision is None or (current["metadata"].get("annotations") or {}).get(
                REVISION) == revision:
            return current
        new = clone(current)
        new["metadata"].setdefault("annotations", {})[REVISION] = revision
        try:
            return self.cluster.store.update(DEPLOYMENT, new, check_rv=False)
        except ApiError as exc:
            if exc.code == 404:
                return current
            raise

    def _create_rs(self, d: Obj, template: Obj, digest: str, replicas: int,
                   revision: int) -> Obj | None:
        name = f"{d['metadata']['name']}-{digest}"
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels[HASH_LABEL] = digest
        template["metadata"]["labels"] = labels
        selector = clone((d.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        surge = _resolve((((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {})
                         .get("maxSurge", "25%"), replicas, True)
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": d["metadata"]["namespace"],
                "labels": labels,
                "annotations": {
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                    "deployment.kubernetes.io/max-replicas": str(replicas + surge),
                    REVISION: str(revision),
                },
                "ownerReferences": [owner_ref(d)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template,
                     "minReadySeconds": int((d.get("spec") or {}).get("minReadySeconds") or 0)},
        }
        try:
            created = self.cluster.store.create(REPLICASET, rs)
        except ApiError as exc:
            if exc.code != 409:
                raise
            existing = self.cluster.peek(REPLICASET, d["metadata"]["namespace"], name)
            if existing is not None and (controller_of(existing) or {}).get("uid") == d["metadata"]["uid"]:
                return existing
            # Someone else's ReplicaSet has our name: bump collisionCount, try another hash.
            status = clone(d.get("status") or {})
            status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
            self.cluster.write_status(DEPLOYMENT, d, status)
            return None
        self.cluster.record_event(d, "Normal", "ScalingReplicaSet",
                                  f"Scaled up replica set {name} from 0 to {replicas}", COMPONENT)
        return created

    def _scale(self, d: Obj, rs: Obj, replicas: int) -> None:
        current = int((rs.get("spec") or {}).get("replicas", 0))
        new = clone(rs)
        new["spec"]["replicas"] = replicas
        annotations = new["metadata"].setdefault("annotations", {})
        annotations["deployment.kubernetes.io/desired-replicas"] = str(
            (d.get("spec") or {}).get("replicas", 1))
        self.cluster.store.update(REPLICASET, new, check_rv=False)
        verb = "up" if replicas > current else "down"
        self.cluster.record_event(
            d, "Normal", "ScalingReplicaSet",
            f"Scaled {verb} replica set {rs['metadata']['name']} from {current} to {replicas}",
            COMPONENT)

    def _annotate(self, rs: Obj, annotations: dict[str, str]) -> None:
        new = clone(rs)
        new["metadata"].setdefault("annotations", {}).update(annotations)
        self.cluster.store.update(REPLICASET, new, check_rv=False)

    def _cleanup(self, d: Obj, old_rs: list[Obj]) -> None:
        """Keep at most revisionHistoryLimit old ReplicaSets (scaled-down, pod-less ones)."""
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [rs for rs in old_rs if not int((rs.get("spec") or {}).get("replicas", 0))
                and not int((rs.get("status") or {}).get("replicas") or 0)]
        idle.sort(key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(REVISION, "0") or 0))
        for rs in idle[: max(0, len(idle) - limit)]:
            try:
                self.cluster.store.delete(REPLICASET, rs["metadata"]["namespace"],
                                          rs["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise

    def _update_status(self, d: Obj, new_rs: Obj | None, all_rs: list[Obj],
                       created_now: bool) -> None:
        d = self.cluster.peek(DEPLOYMENT, d["metadata"]["namespace"], d["metadata"]["name"]) or d
        spec = d.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        old_status = d.get("status") or {}
        status = clone(old_status)

        def total(field: str, items: list[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in items)

        available = total("availableReplicas", all_rs)
        spec_total = sum(int((rs.get("spec") or {}).get("replicas", 0)) for rs in all_rs)
        counts = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": total("replicas", all_rs),
            "updatedReplicas": total("replicas", [new_rs]) if new_rs is not None else 0,
            "readyReplicas": total("readyReplicas", all_rs),
            "availableReplicas": available,
            "unavailableReplicas": max(0, spec_total - available),
        }
        progressed = any(old_status.get(k) != v for k, v in counts.items()
                         if k != "observedGeneration")
        status.update(counts)
        if available >= replicas - max_unavailable(d):
            set_condition(status, {"type": "Available", "status": "True",
                                   "reason": "MinimumReplicasAvailable",
                                   "message": "Deployment has minimum availability."},
                          probe_time=False, update_time=True)
        else:
            set_condition(status, {"type": "Available", "status": "False",
                                   "reason": "MinimumReplicasUnavailable",
                                   "message": "Deployment does not have minimum availability."},
                          probe_time=False, update_time=True)
        if new_rs is not None:
            rs_name = new_rs["metadata"]["name"]
            complete = (counts["updatedReplicas"] == replicas and available == replicas
                        and counts["replicas"] == replicas)
            progressing = condition(status, "Progressing")
            if complete:
                set_condition(status, {"type": "Progressing", "status": "True",
                                       "reason": "NewReplicaSetAvailable",
                                       "message": f'ReplicaSet "{rs_name}" has successfully progressed.'},
                              probe_time=False, update_time=True)
            elif created_now:
                set_condition(status, {"type": "Progressing", "status": "True",
                                       "reason": "NewReplicaSetCreated",
                                       "message": f'Created new replica set "{rs_name}"'},
                              probe_time=False, update_time=True)
            elif progressed or progressing is None or progressing.get("reason") == "NewReplicaSetAvailable":
                set_condition(status, {"type": "Progressing", "status": "True",
                                       "reason": "ReplicaSetUpdated",
                                       "message": f'ReplicaSet "{rs_name}" is progressing.'},
                              probe_time=False, update_time=True)
                if progressed and (c := condition(status, "Progressing")) is not None:
                    c["lastUpdateTime"] = _now()
            deadline = spec.get("progressDeadlineSeconds")
            progressing = condition(status, "Progressing")
            if (not complete and deadline is not None and progressing is not None
                    and progressing.get("status") == "True"):
                since = _parse_time(progressing.get("lastUpdateTime"))
                if since is not None:
                    left = since + int(deadline) - time.time()
                    if left <= 0:
                        set_condition(status, {"type": "Progressing", "status": "False",
                                               "reason": "ProgressDeadlineExceeded",
                                               "message": f'ReplicaSet "{rs_name}" has timed out progressing.'},
                                      probe_time=False, update_time=True)
                    else:
                        self.queue.add_after((d["metadata"]["namespace"], d["metadata"]["name"]),
                                             left + 0.5)
        failure = next((c for rs in all_rs
                        if (c := condition(rs.get("status") or {}, "ReplicaFailure")) is not None), None)
        if failure is not None:
            set_condition(status, {"type": "ReplicaFailure", "status": failure.get("status", "True"),
                                   "reason": failure.get("reason", "FailedCreate"),
                                   "message": failure.get("message", "")},
                          probe_time=False, update_time=True)
        else:
            remove_condition(status, "ReplicaFailure")
        omit_zero(status, "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                  "unavailableReplicas", "collisionCount")
        self.cluster.write_status(DEPLOYMENT, d, status)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
