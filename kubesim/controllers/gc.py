"""Garbage collector: deletes objects whose owners are all gone (ownerReferences).

The store itself handles `propagationPolicy` Foreground (dependents first, then the owner) and
Orphan (ownerReferences stripped). A Background delete removes the owner at once and leaves
the dependents to this collector, as in the real cluster: it sees the owner's DELETED event,
finds the dependents in the owner index and deletes each whose owners no longer exist;
dependents with some owners still alive just lose the dangling references.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.errors import ApiError
from kubesim.resources import REGISTRY, ResourceType
from kubesim.store import clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, Ref

# Owners created in the same burst as their dependents may be indexed a moment later
# (e.g. when priming from a state file); look again before collecting.
_GRACE = 0.05


class GarbageCollector:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("garbage-collector", self.reconcile)

    def on_object(self, event: str, rt: ResourceType, obj: dict) -> None:
        meta = obj["metadata"]
        if event == "DELETED":
            for ref in self.cluster.index.dependents.get(meta.get("uid", ""), ()):
                self.queue.add(ref)
            return
        refs = meta.get("ownerReferences")
        if refs and any(r.get("uid") not in self.cluster.index.uids for r in refs):
            self.queue.add_after((rt.key, meta.get("namespace", ""), meta["name"]), _GRACE)

    def reconcile(self, ref: Ref) -> None:
        rt_key, ns, name = ref
        rt = REGISTRY[rt_key]
        obj = self.cluster.peek(rt, ns or None, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        owners = obj["metadata"].get("ownerReferences") or []
        if not owners:
            return
        alive = [o for o in owners if o.get("uid") in self.cluster.index.uids]
        if len(alive) == len(owners):
            return
        if not alive:
            try:
                self.cluster.store.delete(rt, ns or None, name, propagation="Background")
            except ApiError as exc:
                if exc.code != 404:
                    raise
            return
        new = clone(obj)
        new["metadata"]["ownerReferences"] = alive
        self.cluster.store.update(rt, new, check_rv=False)
