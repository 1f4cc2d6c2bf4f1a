"""The in-memory object store: CRUD with Kubernetes semantics and the shared watch history.

Everything runs on one asyncio event loop, so the store is synchronous and takes no locks.
Stored objects are never mutated in place: every write stores a fresh dict. That lets the
watch history, list responses and the JSON cache share references safely; callers outside
this module get deep copies (`clone`).
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import json
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from kubesim import defaults
from kubesim.config import SimConfig
from kubesim.errors import (
    ApiError,
    already_exists,
    cause,
    conflict,
    conflict_message,
    forbidden,
    gone,
    invalid,
    not_found,
    precondition_failed,
)
from kubesim.resources import REGISTRY, Obj, ResourceType, by_kind
from kubesim.selectors import Matcher, matcher, parse_field_selector, parse_label_selector

log = logging.getLogger("kubesim.store")

FOREGROUND = "foregroundDeletion"

_J = TypeVar("_J")  # a JSON-shaped value (clone's)

AdmissionHook = Callable[[str, ResourceType, Obj, "Obj | None"], None]
Listener = Callable[[str, ResourceType, Obj], None]
# Graceful deletion (the cluster half's kubelet): given (rt, object, requested grace), return
# the grace period to apply, or None to delete as usual.
DeletionHook = Callable[[ResourceType, Obj, "int | None"], "int | None"]

NAMESPACE = by_kind("Namespace")
EVENT = by_kind("Event")

# Kinds whose metadata.generation tracks spec changes.
_GENERATION_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "Job", "Pod", "NetworkPolicy", "Service", "ResourceQuota"}
)
# generateName suffixes use the same consonant-and-digit alphabet as the real server.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def clone(value: _J) -> _J:
    """Deep copy of a JSON-shaped value; several times faster than copy.deepcopy."""
    data: Any = value  # (`type(...) is` narrows no type variable)
    if type(data) is dict:
        return cast(_J, {k: clone(v) for k, v in data.items()})
    if type(data) is list:
        return cast(_J, [clone(v) for v in data])
    return value


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


Key = tuple[str, str]  # (namespace or "", name)


class WatchEvent:
    """One change, shared by every watcher; its wire form is encoded once, on first use."""

    __slots__ = ("rv", "type", "rt", "obj", "prev", "_line")

    def __init__(self, rv: int, type: str, rt: ResourceType, obj: Obj, prev: Obj | None) -> None:
        self.rv = rv
        self.type = type
        self.rt = rt
        self.obj = obj  # the object after the change (for DELETED: its last state)
        self.prev = prev  # the object before the change (None for ADDED); for snapshots
        self._line: bytes | None = None

    @property
    def namespace(self) -> str:
        namespace: str = self.obj["metadata"].get("namespace", "")
        return namespace

    def line(self) -> bytes:
        if self._line is None:
            self._line = (
                b'{"type":"' + self.type.encode() + b'","object":' + encode(self.obj) + b"}\n"
            )
        return self._line


@dataclass
class ListPage:
    """What `Store.select` found: object references (read-only!) in key order."""

    items: list[Obj]
    resource_version: int
    next_key: Key | None  # where the next page starts after; None on the last page
    remaining: int  # objects after this page (meaningful only without selectors)


class Store:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.resource_version = 0
        # rt.key -> namespace ("" for cluster-scoped) -> name -> object
        self._data: dict[tuple[str, str, str], dict[str, dict[str, Obj]]] = {
            key: {} for key in REGISTRY
        }
        # Cached list-item encodings (no kind/apiVersion), dropped on every write.
        self._encoded: dict[tuple[tuple[str, str, str], str, str], bytes] = {}
        self._history: deque[WatchEvent] = deque()
        self._dropped_upto = 0  # events with rv <= this are gone from the history
        self._signal: asyncio.Event | None = None
        # (namespace, involved object's uid, reason, message, type, component) → the Event
        self._event_keys: dict[tuple[str, str | None, str, str, str, str], str] = {}
        self._event_seq = 0
        self._rand = random.Random()
        self.admission: list[AdmissionHook] = []
        self.listeners: list[Listener] = []
        self.deletion_hooks: list[DeletionHook] = []
        # The cluster half's garbage collector: finishes Foreground deletions (see `delete`).
        self.foreground_collector: Callable[[ResourceType, Obj], None] | None = None

    # ----------------------------------------------------------------- reads

    def _bucket(self, rt: ResourceType, namespace: str | None) -> dict[str, Obj]:
        return self._data[rt.key].get(namespace or "", {})

    def peek(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself (read-only!) or None; for the HTTP layer's hot paths."""
        ns = namespace if rt.namespaced else ""
        return self._data[rt.key].get(ns or "", {}).get(name)

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.peek(rt, namespace, name)
        if obj is None:
            raise not_found(rt, name)
        return clone(obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], int]:
        match = matcher(
            parse_label_selector(label_selector), parse_field_selector(field_selector, rt.kind)
        )
        page = self.select(rt, namespace, match)
        return [clone(o) for o in page.items], page.resource_version

    def select(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher | None = None,
        *,
        at_rv: int | None = None,
        after: Key | None = None,
        limit: int | None = None,
        exact_name: str | None = None,
    ) -> ListPage:
        """Objects of a type in key order, optionally as they were at resourceVersion `at_rv`
        (410 if the history no longer reaches back that far), starting after key `after`."""
        namespace = namespace if rt.namespaced else None
        if at_rv is not None and at_rv < self.resource_version:
            objects = self._snapshot(rt, namespace, at_rv)
            list_rv = at_rv
        else:
            objects = self._current(rt, namespace, exact_name)
            list_rv = self.resource_version
        keys = sorted(objects)
        start = 0
        if after is not None:
            start = bisect.bisect_right(keys, after)
        items: list[Obj] = []
        next_key: Key | None = None
        i = start
        for i in range(start, len(keys)):
            obj = objects[keys[i]]
            if match is None or match(obj):
                if limit is not None and len(items) >= limit:
                    next_key = keys[i - 1]
                    break
                items.append(obj)
        else:
            i = len(keys)
        remaining = len(keys) - i if next_key is not None else 0
        return ListPage(items, list_rv, next_key, remaining)

    def _current(
        self, rt: ResourceType, namespace: str | None, exact_name: str | None = None
    ) -> dict[Key, Obj]:
        data = self._data[rt.key]
        if namespace is not None or not rt.namespaced:
            buckets: Iterable[tuple[str, dict[str, Obj]]] = [
                (namespace or "", data.get(namespace or "", {}))
            ]
        else:
            buckets = data.items()
        out: dict[Key, Obj] = {}
        for ns, bucket in buckets:
            if exact_name is not None:
                if exact_name in bucket:
                    out[(ns, exact_name)] = bucket[exact_name]
                continue
            for name, obj in bucket.items():
                out[(ns, name)] = obj
        return out

    def _snapshot(self, rt: ResourceType, namespace: str | None, at_rv: int) -> dict[Key, Obj]:
        """Roll the current state back to `at_rv` with the history's before-images."""
        if at_rv < self._dropped_upto:
            raise gone("The resourceVersion for the provided list is too old.")
        state = self._current(rt, namespace)
        for ev in reversed(self._events_after(at_rv)):
            if ev.rt is not rt:
                continue
            key = (ev.namespace, ev.obj["metadata"]["name"])
            if namespace is not None and key[0] != namespace:
                continue
            if ev.prev is None:
                state.pop(key, None)
            else:
                state[key] = ev.prev
        return state

    def encoded_item(self, rt: ResourceType, obj: Obj) -> bytes:
        """The JSON of a stored object as a list item (built-in lists' items have no
        kind/apiVersion), cached until the object changes."""
        meta = obj["metadata"]
        key = (rt.key, meta.get("namespace", ""), meta["name"])
        current = self.peek(rt, meta.get("namespace"), meta["name"])
        if current is not obj:  # a snapshot's old version: not cacheable
            return encode({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
        data = self._encoded.get(key)
        if data is None:
            data = encode({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
            self._encoded[key] = data
        return data

    def namespace_exists(self, name: str) -> bool:
        return name in self._data[NAMESPACE.key].get("", {})

    # ----------------------------------------------------------------- watch history

    def _events_after(self, rv: int) -> builtins.list[WatchEvent]:
        history = self._history
        if not history or history[-1].rv <= rv:
            return []
        # Every resourceVersion is one event, so the newest `current - rv` events are the
        # ones after rv; indexing a deque near its end is O(1).
        count = min(len(history), self.resource_version - rv)
        n = len(history)
        return [history[j] for j in range(n - count, n)]

    def events_since(self, rv: int) -> builtins.list[WatchEvent]:
        """Events with resourceVersion > rv, oldest first; 410 Expired if some are lost."""
        if rv < self._dropped_upto:
            oldest = self._history[0].rv if self._history else self.resource_version
            raise gone(f"too old resource version: {rv} ({oldest})")
        return self._events_after(rv)

    def change_signal(self) -> asyncio.Event:
        """An event set at the next write; check `events_since` before waiting on it."""
        if self._signal is None:
            self._signal = asyncio.Event()
        return self._signal

    @property
    def oldest_rv(self) -> int:
        return self._dropped_upto

    def compact(self) -> int:
        """Forget the history up to the current resourceVersion (what etcd compaction and a
        restarted watch cache do): lists at, continues from and watches from older
        resourceVersions answer 410 Expired. Returns the compacted resourceVersion."""
        self._history.clear()
        self._dropped_upto = self.resource_version
        return self.resource_version

    # ----------------------------------------------------------------- writes

    def _commit(self, event_type: str, rt: ResourceType, obj: Obj, prev: Obj | None) -> Obj:
        self.resource_version += 1
        rv = self.resource_version
        obj["metadata"]["resourceVersion"] = str(rv)
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if rt.namespaced else ""
        name = meta["name"]
        bucket = self._data[rt.key].setdefault(ns, {})
        if event_type == "DELETED":
            bucket.pop(name, None)
            if not bucket:
                del self._data[rt.key][ns]
        else:
            bucket[name] = obj
        self._encoded.pop((rt.key, ns, name), None)
        self._history.append(WatchEvent(rv, event_type, rt, obj, prev))
        while len(self._history) > self.config.history_size:
            self._dropped_upto = self._history.popleft().rv
        if self._signal is not None:
            self._signal.set()
            self._signal = None
        for listener in self.listeners:
            try:
                listener(event_type, rt, clone(obj))
            except Exception:  # a broken listener must not fail the write that woke it
                log.exception("store listener %r failed", listener)
        return obj

    def _namespace_of(self, rt: ResourceType, obj: Obj, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        return namespace or obj["metadata"].get("namespace") or "default"

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        bucket = self._bucket(rt, namespace)
        for _ in range(100):
            name = prefix + "".join(self._rand.choice(_NAME_ALPHABET) for _ in range(5))
            if name not in bucket:
                return name
        raise ApiError(500, "InternalError", "could not generate a unique name")

    def create(
        self, rt: ResourceType, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        obj = clone(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        ns = self._namespace_of(rt, {"metadata": meta}, namespace)
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    rt.kind,
                    "",
                    [
                        cause(
                            "FieldValueRequired",
                            "name or generateName is required",
                            "metadata.name",
                        )
                    ],
                    group=rt.group,
                )
            name = meta["name"] = self._generate_name(rt, ns, prefix)
        if rt.namespaced:
            ns_obj = self.peek(NAMESPACE, None, ns)
            if ns_obj is None:
                raise not_found(NAMESPACE, ns)
            if ns_obj["metadata"].get("deletionTimestamp"):
                refused = forbidden(
                    rt,
                    name,
                    f"unable to create new content in namespace {ns} because it is being terminated",
                )
                assert refused.details is not None
                refused.details["causes"] = [cause("NamespaceTerminating",
                                                   f"namespace {ns} is being terminated",
                                                   "metadata.namespace")]
                raise refused
        for stale in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            meta.pop(stale, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rt.kind in _GENERATION_KINDS:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        new = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
        new.update({k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")})
        if "status" in rt.subresources:
            # Like the real registry strategies: a create cannot set status; controllers do.
            new.pop("status", None)
        defaults.apply(rt, new, None)
        for hook in self.admission:
            hook("CREATE", rt, new, None)
        if name in self._bucket(rt, ns):
            raise already_exists(rt, name)
        if dry_run:
            return clone(new)
        return clone(self._commit("ADDED", rt, new, None))

    def update(
        self,
        rt: ResourceType,
        obj: Obj,
        *,
        subresource: str | None = None,
        check_rv: bool = True,
        dry_run: bool = False,
    ) -> Obj:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        old = self.peek(rt, meta.get("namespace") or "default", name)
        if old is None:
            raise not_found(rt, name)
        old_meta = old["metadata"]
        sent_rv = meta.get("resourceVersion")
        if check_rv and sent_rv and sent_rv != old_meta["resourceVersion"]:
            raise conflict(rt, name)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise conflict_message(
                rt,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, "
                f"UID in object meta: {old_meta['uid']}",
            )
        if subresource == "status":
            new = clone(old)
            if "status" in obj:
                new["status"] = clone(obj["status"])
        else:
            new = {"kind": rt.kind, "apiVersion": rt.api_version}
            new.update({k: clone(v) for k, v in obj.items() if k not in ("kind", "apiVersion")})
            new_meta = new["metadata"] = clone(meta)
            for fixed in (
                "uid",
                "creationTimestamp",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if fixed in old_meta:
                    new_meta[fixed] = old_meta[fixed]
                else:
                    new_meta.pop(fixed, None)
            if rt.namespaced:
                new_meta["namespace"] = old_meta["namespace"]
            else:
                new_meta.pop("namespace", None)
            new_meta.pop("selfLink", None)
            if "status" in rt.subresources:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            defaults.apply(rt, new, old)
            if rt.kind in _GENERATION_KINDS and new.get("spec") != old.get("spec"):
                new_meta["generation"] = old_meta.get("generation", 0) + 1
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        for hook in self.admission:
            hook("UPDATE", rt, new, clone(old))
        if new == old:
            # The real server writes nothing for a no-op update: no new resourceVersion, no
            # watch event. Controllers rely on that to avoid feedback loops.
            return clone(old)
        if dry_run:
            return clone(new)
        committed = self._commit("MODIFIED", rt, new, old)
        if committed["metadata"].get("deletionTimestamp") and not committed["metadata"].get(
            "finalizers"
        ):
            return clone(self._remove(rt, committed))
        return clone(committed)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        final = dict(obj)
        final["metadata"] = dict(obj["metadata"])
        return self._commit("DELETED", rt, final, obj)

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        grace: int | None = None,
        dry_run: bool = False,
        preconditions: Obj | None = None,
    ) -> Obj:
        """Delete an object. Returns its last state; if finalizers keep it, the returned object
        carries deletionTimestamp and is still stored (`is_stored` tells)."""
        ns = namespace if rt.namespaced else None
        old = self.peek(rt, ns, name)
        if old is None:
            raise not_found(rt, name)
        preconditions = preconditions or {}
        if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
            raise precondition_failed(
                rt, name,
                f"the UID in the precondition ({preconditions['uid']}) does not match the UID "
                f"in record ({old['metadata']['uid']}). The object might have been deleted and "
                "then recreated")
        if preconditions.get("resourceVersion") and (
            preconditions["resourceVersion"] != old["metadata"]["resourceVersion"]
        ):
            raise precondition_failed(
                rt, name,
                f"the ResourceVersion in the precondition ({preconditions['resourceVersion']}) "
                f"does not match the ResourceVersion in record "
                f"({old['metadata']['resourceVersion']}). The object might have been modified")
        if dry_run:
            return clone(old)
        if rt is NAMESPACE:
            return clone(self._delete_namespace(old))
        if old["metadata"].get("deletionTimestamp"):
            return clone(old)  # already being deleted: nothing more to do
        if propagation == "Orphan":
            self._orphan_dependents(old)
        finalizers = list(old["metadata"].get("finalizers") or [])
        for hook in self.deletion_hooks:
            graceful = hook(rt, old, grace)
            if graceful is not None:
                # A running pod: marked now, removed once its containers stopped (by the
                # hook's owner writing its final status; see `update`).
                return clone(self._mark_deleting(rt, old, finalizers, graceful))
        if propagation == "Foreground" and self.foreground_collector is not None:
            # As the real API server: the owner is marked (deletionTimestamp and the
            # foregroundDeletion finalizer) and answered as it is now; the garbage collector
            # deletes the dependents and then lifts the finalizer, which removes the owner.
            current = self._mark_deleting(
                rt, old, [*finalizers, FOREGROUND] if FOREGROUND not in finalizers else finalizers,
                grace)
            for dep_rt, dep in self._dependents(current):
                if self.peek(dep_rt, dep["metadata"].get("namespace"), dep["metadata"]["name"]):
                    self.delete(dep_rt, dep["metadata"].get("namespace"),
                                dep["metadata"]["name"], propagation="Foreground")
            self.foreground_collector(rt, current)
            return clone(self.peek(rt, ns, name) or current)
        if propagation == "Foreground" and self._dependents(old):
            # No garbage collector runs (--no-cluster): the store does its work at once.
            current = self._mark_deleting(rt, old, finalizers + ["foregroundDeletion"], grace)
            for dep_rt, dep in self._dependents(current):
                if self.peek(dep_rt, dep["metadata"].get("namespace"), dep["metadata"]["name"]):
                    self.delete(
                        dep_rt,
                        dep["metadata"].get("namespace"),
                        dep["metadata"]["name"],
                        propagation="Foreground",
                    )
            latest = self.peek(rt, ns, name)
            if latest is None:
                return clone(old)
            stripped = clone(latest)
            stripped["metadata"]["finalizers"] = [
                f for f in finalizers if f != "foregroundDeletion"
            ]
            return self.update(rt, stripped, check_rv=False)
        if finalizers:
            return clone(self._mark_deleting(rt, old, finalizers, grace))
        return clone(self._remove(rt, old))

    def is_stored(self, rt: ResourceType, obj: Obj) -> bool:
        meta = obj["metadata"]
        current = self.peek(rt, meta.get("namespace"), meta["name"])
        return current is not None and current["metadata"]["uid"] == meta.get("uid")

    def _mark_deleting(
        self, rt: ResourceType, old: Obj, finalizers: builtins.list[str], grace: int | None
    ) -> Obj:
        new = clone(old)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None else 0
        new["metadata"]["finalizers"] = finalizers
        return self._commit("MODIFIED", rt, new, old)

    def _dependents(self, owner: Obj) -> builtins.list[tuple[ResourceType, Obj]]:
        uid = owner["metadata"]["uid"]
        ns = owner["metadata"].get("namespace")
        found = []
        for rt in REGISTRY.values():
            if rt.namespaced and ns is None:
                candidates = [o for b in self._data[rt.key].values() for o in b.values()]
            elif rt.namespaced:
                candidates = list(self._data[rt.key].get(ns, {}).values())
            else:
                candidates = list(self._data[rt.key].get("", {}).values())
            for obj in candidates:
                for ref in obj["metadata"].get("ownerReferences") or ():
                    if ref.get("uid") == uid:
                        found.append((rt, obj))
                        break
        return found

    def _orphan_dependents(self, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        for rt, dep in self._dependents(owner):
            new = clone(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit("MODIFIED", rt, new, dep)

    def _delete_namespace(self, old: Obj) -> Obj:
        if old["metadata"].get("deletionTimestamp"):
            return old
        new = clone(old)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        terminating = self._commit("MODIFIED", NAMESPACE, new, old)
        name = old["metadata"]["name"]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.finalize_namespace(name)
        else:
            # Stay Terminating for a moment, like the real namespace controller does.
            loop.call_later(0.2, self.finalize_namespace, name)
        return terminating

    def finalize_namespace(self, name: str) -> None:
        """Delete everything in a terminating namespace, then the namespace itself."""
        ns_obj = self.peek(NAMESPACE, None, name)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        for rt in REGISTRY.values():
            if not rt.namespaced:
                continue
            for obj in list(self._data[rt.key].get(name, {}).values()):
                self._remove(rt, obj)
        self._event_keys = {k: v for k, v in self._event_keys.items() if k[0] != name}
        ns_obj = self.peek(NAMESPACE, None, name)
        if ns_obj is not None:
            if ns_obj["metadata"].get("finalizers"):
                return  # someone else's finalizer holds it
            self._remove(NAMESPACE, ns_obj)

    # ----------------------------------------------------------------- events

    def record_event(
        self,
        involved: Obj,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "kubesim",
    ) -> Obj:
        """Create (or bump the count of) a core/v1 Event about `involved`."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (namespace, meta.get("uid"), reason, message, type, component)
        now = now_rfc3339()
        existing_name = self._event_keys.get(key)
        existing = self.peek(EVENT, namespace, existing_name) if existing_name else None
        if existing is not None:
            bumped = clone(existing)
            bumped["count"] = int(bumped.get("count") or 1) + 1
            bumped["lastTimestamp"] = now
            return self.update(EVENT, bumped, check_rv=False)
        self._event_seq += 1
        name = f"{meta.get('name', 'unknown')}.{time.time_ns() + self._event_seq:x}"
        if not self.namespace_exists(namespace):
            return {}
        event: dict[str, Any] = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": involved.get("kind"),
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "apiVersion": involved.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "source": {"component": component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": "",
        }
        if not meta.get("namespace"):
            del event["involvedObject"]["namespace"]
        created = self.create(EVENT, event, namespace=namespace)
        self._event_keys[key] = name
        return created

    # ----------------------------------------------------------------- persistence

    def dump_state(self) -> dict[str, Any]:
        objects = []
        for rt_key, buckets in self._data.items():
            rt = REGISTRY[rt_key]
            for bucket in buckets.values():
                for obj in bucket.values():
                    objects.append({"resource": list(rt.key), "object": obj})
        return {"resourceVersion": self.resource_version, "objects": objects}

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace everything with a dumped state. The watch history starts empty, so every
        resourceVersion before the loaded one is "too old" (410), as after an etcd compaction."""
        for key in self._data:
            self._data[key] = {}
        self._encoded.clear()
        self._history.clear()
        self._event_keys.clear()
        for entry in state.get("objects", []):
            rt = REGISTRY.get(tuple(entry["resource"]))
            if rt is None:
                continue
            obj = entry["object"]
            ns = obj["metadata"].get("namespace", "") if rt.namespaced else ""
            self._data[rt.key].setdefault(ns, {})[obj["metadata"]["name"]] = obj
        self.resource_version = int(state.get("resourceVersion", 0))
        self._dropped_upto = self.resource_version
