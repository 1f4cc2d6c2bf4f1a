"""The simulated cluster: nodes with GPUs and the control loops that make the API behave.

`Cluster` owns the scheduler, the kubelet, the workload controllers, quota admission, the
load-balancer allocator and GPU telemetry. It sees every write through one store listener,
which keeps a few indexes current (owner → dependents, live uids, namespace → names) and
hands keys to the components' work queues; the components read objects with `store.peek`
(no copies) and write through the store like any client. See kubesim/SEAM.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kubesim import gpus as gpumod
from kubesim.config import SimConfig
from kubesim.discovery import MAJOR as API_MAJOR
from kubesim.discovery import MINOR as API_MINOR
from kubesim.errors import ApiError
from kubesim.inventory import Inventory, load_inventory, node_devices, node_object
from kubesim.resources import REGISTRY, Obj, ResourceType, by_kind
from kubesim.store import clone, now_rfc3339
from kubesim.workqueue import WorkQueue

if TYPE_CHECKING:
    from aiohttp import web

    from kubesim.store import Store

log = logging.getLogger("kubesim.cluster")

NODE = by_kind("Node")
POD = by_kind("Pod")
EVENT = by_kind("Event")

Ref = tuple[tuple[str, str, str], str, str]  # (rt.key, namespace, name)


class Index:
    """What the controllers look up on every event, kept current by the store listener."""

    def __init__(self) -> None:
        self.dependents: dict[str, set[Ref]] = {}  # owner uid -> dependents
        self.owner_uids: dict[Ref, tuple[str, ...]] = {}
        self.uids: dict[str, Ref] = {}  # live objects
        self.ref_uid: dict[Ref, str] = {}
        self.names: dict[tuple[tuple[str, str, str], str], set[str]] = {}  # (rt.key, ns) -> names

    def observe(self, event: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        ref: Ref = (rt.key, ns, meta["name"])
        uid = meta.get("uid", "")
        old_uid = self.ref_uid.get(ref)
        if old_uid is not None and old_uid != uid:
            self.uids.pop(old_uid, None)
        owners = tuple(r.get("uid", "") for r in meta.get("ownerReferences") or ())
        old_owners = self.owner_uids.get(ref, ())
        if event == "DELETED":
            self.uids.pop(uid, None)
            self.ref_uid.pop(ref, None)
            owners = ()
            self.names.get((rt.key, ns), set()).discard(meta["name"])
        else:
            self.uids[uid] = ref
            self.ref_uid[ref] = uid
            self.names.setdefault((rt.key, ns), set()).add(meta["name"])
        if owners != old_owners:
            for owner in old_owners:
                deps = self.dependents.get(owner)
                if deps is not None:
                    deps.discard(ref)
                    if not deps:
                        del self.dependents[owner]
            for owner in owners:
                self.dependents.setdefault(owner, set()).add(ref)
            if owners:
                self.owner_uids[ref] = owners
            else:
                self.owner_uids.pop(ref, None)

    def owned(self, uid: str, rt: ResourceType) -> list[Ref]:
        return [r for r in self.dependents.get(uid, ()) if r[0] == rt.key]

    def names_in(self, rt: ResourceType, namespace: str) -> set[str]:
        return self.names.get((rt.key, namespace), set())


def controller_of(obj: Obj) -> Obj | None:
    refs: list[Obj] = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller"):
            return ref
    return None


def owner_ref(owner: Obj, *, block: bool = True) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


class Cluster:
    def __init__(self, store: Store, config: SimConfig):
        # Imports here: the components import this module for Cluster's type.
        from kubesim import kubelet, metrics, quota, scheduler
        from kubesim.controllers import (
            deployments,
            endpoints,
            gc,
            jobs,
            loadbalancer,
            replicasets,
            serviceaccounts,
            volumes,
        )

        self.store = store
        self.config = config
        self.inventory: Inventory = (
            load_inventory(config.inventory) if config.inventory else Inventory([], {})
        )
        if not self.inventory.kubelet_version:
            self.inventory.kubelet_version = f"v{API_MAJOR}.{API_MINOR}.0"
        self.index = Index()
        self.gpus = gpumod.GpuRegistry(config.seed, config.metrics_interval)
        self.queues: list[WorkQueue] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started_wall = time.time()

        self.scheduler = scheduler.Scheduler(self)
        self.kubelet = kubelet.Kubelet(self)
        self.replicasets = replicasets.ReplicaSetController(self)
        self.deployments = deployments.DeploymentController(self)
        self.jobs = jobs.JobController(self)
        self.gc = gc.GarbageCollector(self)
        self.loadbalancer = loadbalancer.LoadBalancerController(self)
        self.endpoints = endpoints.EndpointsController(self)
        self.quota = quota.QuotaController(self)
        self.serviceaccounts = serviceaccounts.ServiceAccountsController(self)
        self.volumes = volumes.VolumeProvisioner(self)
        self.volumes.create_standard_class()
        self.metrics = metrics.GpuMetrics(self)
        self._create_nodes()

    # ------------------------------------------------------------------ set-up

    def _create_nodes(self) -> None:
        now = now_rfc3339()
        for spec in self.inventory.nodes:
            self.gpus.add_node(spec.name, node_devices(spec))
            if self.store.peek(NODE, None, spec.name) is None:
                node = node_object(spec, self.inventory, now)
                # A create cannot set status (like the real API): register, then report.
                created = self.store.create(NODE, node)
                self.store.update(NODE, {"metadata": created["metadata"], "status": node["status"]},
                                  subresource="status")

    def make_queue(self, name: str, handler: Any) -> WorkQueue:
        queue = WorkQueue(name, handler)
        self.queues.append(queue)
        return queue

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # The scheduler runs with the control plane: its wording follows the API version.
        self.scheduler.new_taint_wording = int(API_MINOR) >= 35
        self.store.admission.extend(self.serviceaccounts.admission_hooks())
        self.store.admission.extend(self.quota.admission_hooks())
        self.store.admission.extend(self.volumes.admission_hooks())
        self.store.listeners.append(self._on_change)
        self.store.deletion_hooks.append(self.kubelet.graceful_deletion)
        self.store.foreground_collector = self.gc.foreground
        # Prime the indexes and the components from what the store already holds (a loaded
        # state file, nodes created above, objects created before start).
        for rt in REGISTRY.values():
            if rt is EVENT:
                continue
            for obj in self.store.select(rt, None).items:
                self._on_change("ADDED", rt, obj)
        for queue in self.queues:
            self._tasks.append(asyncio.create_task(queue.run(), name=f"kubesim-{queue.name}"))

    async def stop(self) -> None:
        if self._on_change in self.store.listeners:
            self.store.listeners.remove(self._on_change)
        if self.kubelet.graceful_deletion in self.store.deletion_hooks:
            self.store.deletion_hooks.remove(self.kubelet.graceful_deletion)
        self.store.foreground_collector = None
        for hook in [*self.serviceaccounts.admission_hooks(), *self.quota.admission_hooks(),
                     *self.volumes.admission_hooks()]:
            if hook in self.store.admission:
                self.store.admission.remove(hook)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        for queue in self.queues:
            queue.close()
        self.kubelet.close()

    # ------------------------------------------------------------------ events in

    def _on_change(self, event: str, rt: ResourceType, obj: Obj) -> None:
        """The single store listener: index, then fan out to the components (no writes)."""
        if rt is EVENT:
            return
        self.index.observe(event, rt, obj)
        kind = rt.kind
        if kind == "Pod":
            self.scheduler.on_pod(event, obj)
            self.kubelet.on_pod(event, obj)
            self.replicasets.on_pod(event, obj)
            self.jobs.on_pod(event, obj)
            self.endpoints.on_pod(event, obj)
        elif kind == "Node":
            self.scheduler.on_node(event, obj)
            self.kubelet.on_node(event, obj)
        elif kind == "ReplicaSet":
            self.replicasets.on_replicaset(event, obj)
            self.deployments.on_replicaset(event, obj)
        elif kind == "Deployment":
            self.deployments.on_deployment(event, obj)
        elif kind == "Job":
            self.jobs.on_job(event, obj)
        elif kind == "Service":
            self.loadbalancer.on_service(event, obj)
            self.endpoints.on_service(event, obj)
        elif kind == "Namespace":
            self.serviceaccounts.on_namespace(event, obj)
        elif kind == "ServiceAccount":
            self.serviceaccounts.on_service_account(event, obj)
        elif kind == "PersistentVolumeClaim":
            self.volumes.on_claim(event, obj)
        elif kind == "PersistentVolume":
            self.volumes.on_volume(event, obj)
        elif kind == "StorageClass":
            self.volumes.on_storage_class(event, obj)
        self.quota.on_object(event, rt, obj)
        self.gc.on_object(event, rt, obj)

    # ------------------------------------------------------------------ helpers for components

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def now(self) -> float:
        """Monotonic seconds, for timers."""
        return self.loop.time()

    def peek(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object (read-only: never mutate it; `clone` before writing)."""
        return self.store.peek(rt, namespace, name)

    def record_event(self, obj: Obj, type_: str, reason: str, message: str,
                     component: str) -> None:
        try:
            self.store.record_event(obj, reason=reason, message=message, type=type_,
                                    component=component)
        except ApiError as exc:  # e.g. the namespace is terminating: the event is moot
            log.debug("event %s on %s dropped: %s", reason, obj["metadata"].get("name"), exc)

    def write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> Obj | None:
        """Replace an object's status (no-op writes are dropped by the store)."""
        new = {"metadata": dict(obj["metadata"]), "status": status}
        try:
            return self.store.update(rt, new, subresource="status", check_rv=False)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def set_pod_condition(self, pod: Obj, condition: Obj) -> None:
        status = clone(pod.get("status") or {})
        set_condition(status, condition)
        self.write_status(POD, pod, status)

    def bind(self, pod: Obj, node: str) -> bool:
        """What the scheduler's binding call does: set spec.nodeName and PodScheduled=True."""
        bound = clone(pod)
        bound["spec"]["nodeName"] = node
        try:
            bound = self.store.update(POD, bound, check_rv=False)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        status = clone(bound.get("status") or {})
        set_condition(status, {"type": "PodScheduled", "status": "True"})
        self.write_status(POD, bound, status)
        meta = pod["metadata"]
        self.record_event(bound, "Normal", "Scheduled",
                          f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
                          "default-scheduler")
        return True

    # ------------------------------------------------------------------ SEAM entry points

    def render_metrics(self) -> str:
        return self.metrics.render()

    def pod_log(self, namespace: str, name: str, container: str | None, *,
                tail_lines: int | None = None, timestamps: bool = False,
                previous: bool = False) -> list[str]:
        return self.kubelet.pod_log(namespace, name, container, tail_lines=tail_lines,
                                    timestamps=timestamps, previous=previous)

    async def follow_log(self, namespace: str, name: str, container: str | None, *,
                         timestamps: bool = False) -> AsyncIterator[str]:
        """New lines from now on (the server first sends what `pod_log` returned)."""
        async for line in self.kubelet.follow_log(namespace, name, container,
                                                  timestamps=timestamps):
            yield line

    def control_routes(self) -> list[web.RouteDef]:
        from kubesim import control

        return control.routes(self)


def set_condition(status: Obj, condition: Obj, *, probe_time: bool = True,
                  update_time: bool = False) -> bool:
    """Add or replace a condition by type; keeps lastTransitionTime while the status holds.

    Pod and Job conditions carry `lastProbeTime`; Deployment conditions carry
    `lastUpdateTime` (bumped when reason or message change). Returns whether anything changed.
    """
    now = now_rfc3339()
    conditions = status.setdefault("conditions", [])
    for i, existing in enumerate(conditions):
        if existing.get("type") != condition["type"]:
            continue
        same_status = existing.get("status") == condition.get("status")
        if same_status and all(existing.get(k) == v for k, v in condition.items()):
            return False
        merged = dict(condition)
        if probe_time:
            merged["lastProbeTime"] = None
        if update_time:
            merged["lastUpdateTime"] = now
        merged["lastTransitionTime"] = existing.get("lastTransitionTime", now) if same_status else now
        conditions[i] = merged
        return True
    merged = dict(condition)
    if probe_time:
        merged["lastProbeTime"] = None
    if update_time:
        merged["lastUpdateTime"] = now
    merged["lastTransitionTime"] = now
    conditions.append(merged)
    return True


def remove_condition(status: Obj, type_: str) -> bool:
    conditions = status.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != type_]
    if len(kept) == len(conditions):
        return False
    status["conditions"] = kept
    return True
