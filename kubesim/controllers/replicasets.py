"""ReplicaSet controller: keeps `spec.replicas` active pods, reports why when it cannot.

A refused pod create (quota, LimitRange, validation) is what the real controller shows: a
Warning `FailedCreate` event `Error creating: <API error message>` and a `ReplicaFailure`
condition, then retries with back-off (and at once when quota may have freed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.cluster import controller_of, owner_ref, remove_condition, set_condition
from kubesim.controllers.common import is_active, is_ready, omit_zero
from kubesim.errors import ApiError
from kubesim.resources import Obj, by_kind
from kubesim.selectors import LabelSelector, selector_from_match
from kubesim.store import clone
from kubesim.workqueue import coalesce_delay

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

POD = by_kind("Pod")
REPLICASET = by_kind("ReplicaSet")
COMPONENT = "replicaset-controller"
BURST = 500  # the real controller creates at most this many pods per sync

Key = tuple[str, str]


def pod_from_template(owner: Obj, template: Obj, generate_name: str) -> Obj:
    tmeta = template.get("metadata") or {}
    meta = {
        "generateName": generate_name,
        "namespace": owner["metadata"]["namespace"],
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [owner_ref(owner)],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": clone(template.get("spec") or {})}


def deletion_rank(pod: Obj) -> tuple[bool, int, bool, tuple[int, ...]]:
    """Which surplus pods go first: unscheduled, then pending, not ready, then the newest."""
    status = pod.get("status") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase", ""), 0)
    created = pod["metadata"].get("creationTimestamp", "")
    return (bool((pod.get("spec") or {}).get("nodeName")), phase_rank, is_ready(pod),
            # newest first: invert the timestamp's ordering
            tuple(-ord(ch) for ch in created))


class ReplicaSetController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("replicasets", self.reconcile)
        self.failures: dict[Key, int] = {}
        self.sizes: dict[Key, int] = {}  # pods per ReplicaSet at its last reconcile

    def on_replicaset(self, event: str, rs: Obj) -> None:
        key = (rs["metadata"]["namespace"], rs["metadata"]["name"])
        if event == "DELETED":
            self.queue.forget(key)
            self.failures.pop(key, None)
            self.sizes.pop(key, None)
        else:
            self.queue.add(key)

    def on_pod(self, event: str, pod: Obj) -> None:
        ref = controller_of(pod)
        if ref is not None and ref.get("kind") == "ReplicaSet":
            key = (pod["metadata"]["namespace"], ref.get("name", ""))
            self.queue.add_after(key, coalesce_delay(self.sizes.get(key, 0)))

    def retry_namespace(self, namespace: str) -> None:
        """Quota or limits changed: creations that failed may succeed now."""
        for key in list(self.failures):
            if key[0] == namespace:
                self.queue.add(key)

    def owned_pods(self, rs: Obj) -> list[Obj]:
        pods = []
        for _, ns, name in self.cluster.index.owned(rs["metadata"]["uid"], POD):
            pod = self.cluster.peek(POD, ns, name)
            if pod is not None:
                pods.append(pod)
        return pods

    def reconcile(self, key: Key) -> None:
        rs = self.cluster.peek(REPLICASET, *key)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        selector = selector_from_match(spec.get("selector"))
        active = [p for p in self.owned_pods(rs) if is_active(p)]
        self.sizes[key] = len(active)
        want = int(spec.get("replicas", 1))
        error: ApiError | None = None
        if want > len(active):
            for _ in range(min(want - len(active), BURST)):
                pod = pod_from_template(rs, spec.get("template") or {},
                                        f"{rs['metadata']['name']}-")
                try:
                    created = self.cluster.store.create(POD, pod)
                except ApiError as exc:
                    error = exc
                    break
                self.cluster.record_event(rs, "Normal", "SuccessfulCreate",
                                          f"Created pod: {created['metadata']['name']}", COMPONENT)
        elif want < len(active):
            for pod in sorted(active, key=deletion_rank)[: len(active) - want]:
                try:
                    self.cluster.store.delete(POD, key[0], pod["metadata"]["name"])
                except ApiError as exc:
                    if exc.code != 404:
                        raise
                self.cluster.record_event(rs, "Normal", "SuccessfulDelete",
                                          f"Deleted pod: {pod['metadata']['name']}", COMPONENT)
        if error is not None:
            self.cluster.record_event(rs, "Warning", "FailedCreate",
                                      f"Error creating: {error.message}", COMPONENT)
            failures = self.failures.get(key, 0) + 1
            self.failures[key] = failures
            self.queue.add_after(key, min(30.0, 0.5 * 2 ** min(failures, 6)))
        else:
            self.failures.pop(key, None)
        self._update_status(key, error, selector)

    def _update_status(self, key: Key, error: ApiError | None, selector: LabelSelector) -> None:
        rs = self.cluster.peek(REPLICASET, *key)
        if rs is None:
            return
        pods = [p for p in self.owned_pods(rs) if is_active(p)]
        status = clone(rs.get("status") or {})
        ready = [p for p in pods if is_ready(p)]
        status.update({
            "replicas": len(pods),
            "fullyLabeledReplicas": sum(1 for p in pods
                                        if selector.matches(p["metadata"].get("labels"))),
            "readyReplicas": len(ready),
            "availableReplicas": len(ready),
            "observedGeneration": rs["metadata"].get("generation", 1),
        })
        if error is not None:
            set_condition(status, {"type": "ReplicaFailure", "status": "True",
                                   "reason": "FailedCreate", "message": error.message},
                          probe_time=False)
        elif len(pods) >= int((rs.get("spec") or {}).get("replicas", 1)):
            remove_condition(status, "ReplicaFailure")
        if not status.get("conditions"):
            status.pop("conditions", None)
        omit_zero(status, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
        self.cluster.write_status(REPLICASET, rs, status)

