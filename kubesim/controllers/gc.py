"""Garbage collector: deletes objects whose owners are all gone (ownerReferences).

- Background: the owner goes at once and the dependents are left to this collector, as in
  the real cluster: it sees the owner's DELETED event, finds the dependents in the owner
  index and deletes each whose owners no longer exist; dependents with some owners still
  alive just lose the dangling references.
- Foreground: the store marks the owner (deletionTimestamp, finalizer `foregroundDeletion`)
  and deletes its dependents; this collector lifts the finalizer once the last dependent is
  gone, which removes the owner.
- Orphan: the store strips the dependents' references.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.errors import ApiError
from kubesim.resources import REGISTRY, Obj, ResourceType
from kubesim.store import FOREGROUND, clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, Ref

# Owners created in the same burst as their dependents may be indexed a moment later
# (e.g. when priming from a state file); look again before collecting.
_GRACE = 0.05


class GarbageCollector:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("garbage-collector", self.reconcile)

    def on_object(self, event: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        if event == "DELETED":
            for ref in self.cluster.index.dependents.get(meta.get("uid", ""), ()):
                self.queue.add(ref)
            # an owner in foreground deletion may be waiting for this one
            for owner in meta.get("ownerReferences") or ():
                owner_ref = self.cluster.index.uids.get(owner.get("uid", ""))
                if owner_ref is not None:
                    self.queue.add(owner_ref)
            return
        if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or ()):
            self.queue.add((rt.key, meta.get("namespace", ""), meta["name"]))
        refs = meta.get("ownerReferences")
        if refs and any(r.get("uid") not in self.cluster.index.uids for r in refs):
            self.queue.add_after((rt.key, meta.get("namespace", ""), meta["name"]), _GRACE)

    def reconcile(self, ref: Ref) -> None:
        rt_key, ns, name = ref
        rt = REGISTRY[rt_key]
        obj = self.cluster.peek(rt, ns or None, name)
        if obj is None:
            return
        if obj["metadata"].get("deletionTimestamp"):
            if FOREGROUND in (obj["metadata"].get("finalizers") or ()):
                self._finish_foreground(rt, obj)
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

    def foreground(self, rt: ResourceType, owner: Obj) -> None:
        """The store marked `owner` for foreground deletion: finish it when its dependents
        are gone."""
        meta = owner["metadata"]
        self.queue.add((rt.key, meta.get("namespace", ""), meta["name"]))

    def _finish_foreground(self, rt: ResourceType, owner: Obj) -> None:
        if self.cluster.index.dependents.get(owner["metadata"].get("uid", "")):
            return  # each dependent's DELETED event brings us back
        new = clone(owner)
        new["metadata"]["finalizers"] = [
            f for f in owner["metadata"].get("finalizers") or () if f != FOREGROUND]
        try:
            self.cluster.store.update(rt, new, check_rv=False)
        except ApiError as exc:
            if exc.code != 404:
                raise
