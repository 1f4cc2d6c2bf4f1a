"""A reflector: one kind of the cluster kept in memory by list + watch.

It lists the kind once, then watches from the list's resourceVersion in a daemon thread. A
watch the server ends (its timeout) or that breaks off is resumed from the last
resourceVersion seen (BOOKMARKs keep that recent while nothing changes); a 410 Expired relists;
an unreachable cluster is retried with a growing pause. Readers get the store (uid → object,
or a compact projection of it), whether it has `synced`, and `version`, a counter that moves
with every change, so that views derived from the store can be memoised on it.

A consumer that acts on changes (the workload tracker) gives `on_change(type, obj)`: called
from the reflector's thread for every ADDED, MODIFIED and DELETED object once the store holds
the change, and before `resource_version` moves past it, so a consumer that persists
`resource_version` after handling what it was told never stores a cursor past an unhandled
change. A list tells it every listed object (ADDED or MODIFIED) and every object the list no
longer has (DELETED, with its last known state), then `on_list(started)` (the wall-clock time
the list was asked for). Given `resource_version` and `items` (a store kept from before), the
reflector resumes from there instead of listing; a 410 relists as always.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .client import Expired, Kube, KubeError, KubeUnavailable

log = logging.getLogger(__name__)

Obj = dict[str, Any]

WATCH_SECONDS = 30  # one watch request; the server ends it, the reflector resumes
BACKOFF_FIRST, BACKOFF_MAX = 0.2, 5.0  # seconds between tries while the cluster does not answer


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name')}"


class Reflector:
    """One kind (optionally one label selector) of the cluster, by list + watch."""

    def __init__(self, kind: str, *, kube: Callable[[], Kube], label_selector: str | None = None,
                 project: Callable[[Obj], Any] | None = None,
                 watch_seconds: int = WATCH_SECONDS,
                 on_change: Callable[[str, Obj], None] | None = None,
                 on_list: Callable[[float], None] | None = None,
                 resource_version: str | None = None,
                 items: dict[str, Any] | None = None) -> None:
        """`project` may return None for an object not worth keeping (it is then not stored,
        but `on_change` still hears of it)."""
        self.kind = kind
        self.label_selector = label_selector
        self._kube_factory = kube
        self._project = project or (lambda obj: obj)
        self._watch_seconds = watch_seconds
        self._on_change = on_change
        self._on_list = on_list
        self._lock = threading.Lock()
        self._store: dict[str, Any] = dict(items or {})
        # the last one seen (list, event, bookmark); given, the first request resumes from it
        self.resource_version: str | None = resource_version
        self.version = 0  # moves with every change of the store
        self.lists = 0
        self.watches = 0
        self.expired = 0
        self.error: KubeError | None = None  # the last failure, None since the last success
        self.failing_since: float | None = None
        self._synced = threading.Event()
        self._tried = threading.Event()  # the first list answered or failed
        self._stop = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._cancel: Callable[[], None] | None = None  # ends the watch in flight
        if resource_version is not None:
            # resumed: the store given is the one at that resourceVersion
            self._synced.set()
            self._tried.set()

    # --- readers ---------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) for the first list; False when it has not come. Returns
        early when the first try failed: a cluster that refuses is not waited for."""
        if not self.synced:
            self._tried.wait(timeout)
        return self.synced

    def items(self) -> list[Any]:
        """The objects now (a copy of the list; the objects themselves are shared: read only)."""
        with self._lock:
            return list(self._store.values())

    def snapshot(self) -> tuple[int, list[Any]]:
        with self._lock:
            return self.version, list(self._store.values())

    def get(self, key: str) -> Any | None:
        with self._lock:
            return self._store.get(key)

    def __len__(self) -> int:
        return len(self._store)

    def store(self) -> dict[str, Any]:
        """A copy of the store (key → object), to resume a later reflector from."""
        with self._lock:
            return dict(self._store)

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = 10.0) -> bool:
        """Wait until `predicate(items)` holds (checked at every change); its last answer."""
        deadline = time.monotonic() + timeout
        while not predicate(self.items()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(left, 0.2))
        return True

    # --- the thread --------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"reflector-{self.kind}")
            self._thread.start()

    def stop(self) -> None:
        """End the thread: its watch is cut off; it applies nothing more."""
        self._stop.set()
        cancel = self._cancel
        if cancel is not None:
            try:
                cancel()
            except Exception:  # noqa: BLE001 - the stream may be closing already
                log.debug("reflector of %s: ending its watch failed", self.kind, exc_info=True)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        backoff = BACKOFF_FIRST
        kube: Kube | None = None
        while not self._stop.is_set():
            try:
                kube = kube or self._kube_factory()
                if self.resource_version is None:
                    self._list(kube)
                self._watch(kube)
                backoff = BACKOFF_FIRST
                self._ok()
            except Expired:
                self.expired += 1
                self.resource_version = None  # relist; the store serves until the list is in
                self._ok()
            except KubeError as exc:
                if self._stop.is_set():
                    return  # its watch was ended by stop()
                self._failed(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
            except Exception as exc:  # noqa: BLE001 - a reflector must not die silently
                log.exception("reflector of %s failed", self.kind)
                self._failed(KubeUnavailable(f"reflector of {self.kind} failed: {exc}"))
                self._stop.wait(BACKOFF_MAX)

    def _ok(self) -> None:
        self.error, self.failing_since = None, None

    def _failed(self, exc: KubeError) -> None:
        if self.error is None:
            log.warning("reflector of %s: %s", self.kind, exc)
        self.error = exc
        self.failing_since = self.failing_since or time.monotonic()
        self._tried.set()

    def _list(self, kube: Kube) -> None:
        started = time.time()
        result = kube.list(self.kind, label_selector=self.label_selector)
        self.lists += 1
        items = result.get("items") or []
        store = {}
        for obj in items:
            projected = self._project(obj)
            if projected is not None:
                store[object_key(obj)] = projected
        resource_version = (result.get("metadata") or {}).get("resourceVersion") or "0"
        del result  # the listed objects themselves are not kept
        with self._changed:
            before, self._store = self._store, store
            self.version += 1
            self._changed.notify_all()
        if self._on_change is not None:
            for obj in items:
                self._on_change("MODIFIED" if object_key(obj) in before else "ADDED", obj)
            for key, obj in before.items():
                if key not in store and isinstance(obj, dict):
                    self._on_change("DELETED", obj)
        if self._on_list is not None:
            self._on_list(started)
        self.resource_version = resource_version
        self._ok()
        self._synced.set()
        self._tried.set()

    def _opened(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel
        if self._stop.is_set():  # stopped while the request was on its way
            cancel()

    def _watch(self, kube: Kube) -> None:
        self.watches += 1
        for event_type, obj in kube.watch(self.kind, label_selector=self.label_selector,
                                          resource_version=self.resource_version,
                                          timeout_seconds=self._watch_seconds,
                                          opened=self._opened):
            if self._stop.is_set():
                return
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if event_type in ("ADDED", "MODIFIED", "DELETED"):
                key = object_key(obj)
                projected = None if event_type == "DELETED" else self._project(obj)
                with self._changed:
                    if projected is None:
                        self._store.pop(key, None)
                    else:
                        self._store[key] = projected
                    self.version += 1
                    self._changed.notify_all()
                if self._on_change is not None:
                    self._on_change(event_type, obj)
                if rv:
                    self.resource_version = rv
            elif event_type == "BOOKMARK" and rv:
                self.resource_version = rv
