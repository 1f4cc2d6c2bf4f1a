"""The process's copy of the cluster: reflectors for Node and Pod (every namespace: capacity
counts the pods the portal did not create too), and, once a GPU type claimed through DRA is
counted on a cluster that serves resource.k8s.io/v1, for ResourceSlice and ResourceClaim
(devices.py: the devices published and those allocated; never started where the API is not
served, so kubesim is never asked for them). The lifecycle tracker follows the portal's own
Jobs, Deployments, Services and Events with watches of its own (workloads/tracking/).

Started on first use in any process (web, Celery worker), one per process and cluster: the
home cluster's (the settings' kubeconfig: pointing the settings at another cluster stops the
old reflectors and starts new ones) and one per other cluster read by name (its client from
the clusters' registry, kube.client.cluster_client). A read waits at most PORTAL_CLUSTER_CACHE_SYNC_SECONDS for the
first list; a cluster that never answered, or whose watches have failed for longer than
PORTAL_CLUSTER_CACHE_STALE_SECONDS, raises KubeUnavailable, as a list would have.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from django.conf import settings

from kube.client import (
    Kube,
    KubeUnavailable,
    api_client,
    cluster_connection,
    connection_client,
    home_cluster,
)
from kube.labels import LABEL_WORKLOAD_ID
from kube.quantity import parse_quantity
from kube.reflector import Obj, Reflector

from .devices import claim_view, slice_view

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
BASIC_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


class PodView(NamedTuple):
    """What the read model keeps of a pod: where it runs and the extended resources
    (GPUs, MIG slices) its containers ask for: a few strings and numbers per pod."""

    namespace: str
    name: str
    uid: str
    node_name: str
    node_selector: tuple[tuple[str, str], ...]
    phase: str
    resources: tuple[tuple[str, int], ...]  # extended resource → count (limits, else requests)
    workload_id: int | None

    @property
    def live(self) -> bool:
        return self.phase not in TERMINAL_PHASES

    def count(self, resource: str) -> int:
        return next((n for name, n in self.resources if name == resource), 0)


def pod_view(pod: Obj) -> PodView:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    counts: dict[str, int] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for name, amount in asked.items():
            if name not in BASIC_RESOURCES and not name.startswith("hugepages-") and amount:
                counts[name] = counts.get(name, 0) + int(parse_quantity(amount))
    workload = ((meta.get("labels") or {}).get(LABEL_WORKLOAD_ID) or "")
    return PodView(
        namespace=meta.get("namespace") or "", name=meta.get("name") or "",
        uid=meta.get("uid") or "", node_name=spec.get("nodeName") or "",
        node_selector=tuple(sorted((spec.get("nodeSelector") or {}).items())),
        phase=(pod.get("status") or {}).get("phase") or "",
        resources=tuple(sorted((k, v) for k, v in counts.items() if v)),
        workload_id=int(workload) if workload.isdigit() else None)


class ClusterCache:
    """The reflectors of one cluster connection, and the views memoised on their versions."""

    def __init__(self, kube: Callable[[], Kube]) -> None:
        self.nodes = Reflector("Node", kube=kube)
        self.pods = Reflector("Pod", kube=kube, project=pod_view)
        # started by devices() on first use: only a cluster with DRA types serves them
        self.slices = Reflector("ResourceSlice", kube=kube, project=slice_view)
        self.claims = Reflector("ResourceClaim", kube=kube, project=claim_view)
        self._dra = False
        self._memo: dict[str, tuple[Any, Any]] = {}
        self._memo_lock = threading.Lock()

    @property
    def reflectors(self) -> tuple[Reflector, ...]:
        return (self.nodes, self.pods, *((self.slices, self.claims) if self._dra else ()))

    def start(self) -> None:
        for reflector in self.reflectors:
            reflector.start()

    def devices(self) -> tuple[Reflector, Reflector]:
        """The ResourceSlice and ResourceClaim reflectors, started on first call."""
        with self._memo_lock:
            if not self._dra:
                self._dra = True
                self.slices.start()
                self.claims.start()
        return self.slices, self.claims

    def stop(self) -> None:
        for reflector in self.reflectors:
            reflector.stop()

    @property
    def version(self) -> tuple[int, ...]:
        return tuple(r.version for r in self.reflectors)

    def ready(self, *reflectors: Reflector) -> None:
        """Raise KubeUnavailable unless these reflectors (default: all) hold a current copy."""
        wait = float(settings.PORTAL_CLUSTER_CACHE_SYNC_SECONDS)
        stale = float(settings.PORTAL_CLUSTER_CACHE_STALE_SECONDS)
        deadline = time.monotonic() + wait
        for reflector in reflectors or self.reflectors:
            if not reflector.wait_synced(max(deadline - time.monotonic(), 0)):
                raise reflector.error or KubeUnavailable(
                    f"the cluster's {reflector.kind} list did not come within {wait:g} s")
            since = reflector.failing_since
            if since is not None and time.monotonic() - since > stale:
                raise reflector.error or KubeUnavailable("the cluster stopped answering")

    def memo(self, name: str, key: Any, build: Callable[[], Any]) -> Any:
        """`build()`, kept while `key` (which should hold the versions it read) is unchanged."""
        with self._memo_lock:
            kept = self._memo.get(name)
        if kept is not None and kept[0] == key:
            return kept[1]
        value = build()
        with self._memo_lock:
            self._memo[name] = (key, value)
        return value

    def wait_for(self, predicate: Callable[[ClusterCache], bool], timeout: float = 10.0) -> bool:
        """Wait until `predicate(self)` holds (tests: the copy caught up with a change)."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True


_lock = threading.Lock()
# (process, cluster name: "" for the home cluster, its connection: the home cluster's
# kubeconfig, or where another's credentials are)
_caches: dict[tuple[int, str, str], ClusterCache] = {}


def cluster_cache(cluster: str | None = None) -> ClusterCache:
    """This process's read model of the home cluster (the settings' kubeconfig), or of the
    cluster named (started on first use; its connection looked up here, at each read, so that
    an admin's change of its credentials starts a new one, and never in the reflectors'
    threads)."""
    name = home_cluster(cluster)
    if name is None:
        kubeconfig = settings.KUBECONFIG or ""
        key = (os.getpid(), "", kubeconfig)
        kube: Callable[[], Kube] = lambda: Kube(api_client(kubeconfig))  # noqa: E731
    else:
        connection = cluster_connection(name)
        key = (os.getpid(), name, f"{connection.kubeconfig}|{connection.secret}")
        kube = lambda: Kube(connection_client(connection), cluster=name)  # noqa: E731
    with _lock:
        cache = _caches.get(key)
        if cache is None:
            # the settings (or the admin) now point the cluster elsewhere: its old copy goes
            for old_key in [k for k in _caches if k[1] == key[1] and k != key]:
                _caches.pop(old_key).stop()
            cache = _caches[key] = ClusterCache(kube)
            cache.start()
        return cache


def cluster_cache_drop(cluster: str | None = None) -> None:
    """Stop and forget every read model of this process, or the one of the cluster named (an
    admin changed or disabled it); the next read starts a new one."""
    name = home_cluster(cluster) if cluster is not None else None
    with _lock:
        for key in [k for k in _caches if cluster is None or k[1] == (name or "")]:
            _caches.pop(key).stop()


# at the process's end the reflectors stop first: a watch must not go on failing (and logging)
# against a cluster or a cache that is already gone while the interpreter shuts down
atexit.register(cluster_cache_drop)
