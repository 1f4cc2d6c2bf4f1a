"""The kubelet's pod-resources API of one simulated GPU node, for the real control plane.

KWOK's nodes have no kubelet and this machine has no GPU, yet the GPU agent (gpuagent/) should map
GPUs to pods the way it does on a real node: by asking `v1.PodResourcesLister/List` on the
kubelet's unix socket. `PodResourcesServer` is that socket for one node. Like a kubelet it
watches the pods bound to its node (`spec.nodeName`) through the API server, under the node's own
identity (`system:node:<name>`, which the Node authorizer lets list and watch exactly those
pods), and like the NVIDIA device plugin's allocation it gives each container that asks for
`nvidia.com/gpu` (or a MIG resource) device ids, lowest free GPU first: the UUIDs
kubesim.inventory.node_devices gives the node, so kubesim and this agree on them.

What runs on a GPU is physics, not something a kubelet reports: the server also keeps the node
file (gpuagent/README.md, "The node file") that the agent's fake NVML reads. It names the node's
GPUs and, for each held GPU, the workload its pod runs: the pod's annotation
`kubesim.io/gpu-trace` (or its env `KUBESIM_GPU_TRACE`), `busy` by default, as in kubesim. The
agent itself learns holders only through List, as on a real node. A time-sliced GPU's entry also
lists a process per pod holding a replica of it, with that pod's workload: what the GPU's
processes and their cgroups would tell the agent on a real node. A GPU in MIG mode lists its
instances (`mig`), each with the workload of the pod holding it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from gpuagent.podresources import (
    SERVICE,
    ContainerDevices,
    ContainerResources,
    ListPodResourcesRequest,
    ListPodResourcesResponse,
    PodResources,
)
from kubesim import gpus
from kubesim.inventory import NodeSpec, node_devices
from kubesim.kubelet import GPU_TRACE
from kubesim.scheduler import device_wants, is_terminal

log = logging.getLogger(__name__)

WORKLOAD_ENV = "KUBESIM_GPU_TRACE"  # what a portal user can set at launch, as kubesim reads it
WATCH_SECONDS = 20  # each watch ends after this long and is opened again where it left off


def pod_workload(pod: dict[str, Any]) -> str:
    """The workload a pod runs on its GPUs: the annotation, else the env variable, else busy."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(GPU_TRACE):
        return str(annotations[GPU_TRACE])
    for container in (pod.get("spec") or {}).get("containers") or ():
        for env in container.get("env") or ():
            if isinstance(env, dict) and env.get("name") == WORKLOAD_ENV and env.get("value"):
                return str(env["value"])
    return "busy"


@dataclass
class PodEntry:
    """An active pod of the node, as List reports it."""

    namespace: str
    name: str
    containers: list[str]
    devices: dict[str, list[tuple[str, list[str]]]]  # container → [(resource, device ids)]
    workload: str


class PodResourcesServer:
    """One node's pod-resources socket, and the node file of its GPUs' workloads.

    `api` is a kubernetes.client.ApiClient under the node's identity; `start` lists the node's
    pods (so the first List is already right), then a thread follows them with a watch.
    """

    def __init__(self, spec: NodeSpec, *, api: Any, socket_path: Path, node_file: Path) -> None:
        self.spec = spec
        self.api = api
        self.socket_path = Path(socket_path)
        self.node_file = Path(node_file)
        self.devices = node_devices(spec)
        self.pods: dict[str, PodEntry] = {}  # uid → entry
        self._held: dict[str, str] = {}  # device id → uid of the pod holding it
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None  # the open watch, shut down to end it at once
        self._server: grpc.Server | None = None

    # --- the API server side ----------------------------------------------------------------

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def _relist(self) -> str:
        """Every pod of the node, as now; returns the list's resourceVersion."""
        response = self._core().list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.spec.name}", _preload_content=False)
        body = json.loads(response.data)
        seen = set()
        for pod in body.get("items") or ():
            seen.add(pod["metadata"]["uid"])
            self.observe("ADDED", pod)
        with self._lock:
            gone = [uid for uid in self.pods if uid not in seen]
        for uid in gone:
            self._release(uid)
        return str(body["metadata"]["resourceVersion"])

    def _follow(self, resource_version: str) -> None:
        """Watch the node's pods from `resource_version` on, until stopped: each watch ends
        after WATCH_SECONDS and the next starts where it ended; 410 Gone lists again."""
        from kubernetes.watch.watch import iter_resp_lines

        while not self._stopping.is_set():
            try:
                response = self._core().list_pod_for_all_namespaces(
                    field_selector=f"spec.nodeName={self.spec.name}", watch=True,
                    resource_version=resource_version, allow_watch_bookmarks=True,
                    timeout_seconds=WATCH_SECONDS, _preload_content=False)
                self._response = response
                try:
                    for line in iter_resp_lines(response):
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:  # compacted past where we were
                                resource_version = self._relist_retrying()
                            else:
                                log.warning("%s: watching pods: %s", self.spec.name,
                                            obj.get("message"))
                                self._stopping.wait(1.0)
                            break
                        resource_version = obj["metadata"]["resourceVersion"]
                        if event.get("type") != "BOOKMARK":
                            self.observe(event["type"], obj)
                finally:
                    self._response = None
                    response.release_conn()
            except Exception as exc:  # the API server went away, restarts, or refused
                if self._stopping.is_set():
                    return
                if getattr(exc, "status", None) == 410:
                    resource_version = self._relist_retrying()
                    continue
                log.warning("%s: watching pods: %s", self.spec.name, exc)
                self._stopping.wait(1.0)

    def _relist_retrying(self) -> str:
        while True:
            try:
                return self._relist()
            except Exception as exc:
                if self._stopping.is_set():
                    return "0"
                log.warning("%s: listing pods: %s", self.spec.name, exc)
                self._stopping.wait(1.0)

    # --- allocation ---------------------------------------------------------------------------

    def observe(self, event_type: str, pod: dict[str, Any]) -> None:
        """A pod of this node was seen (a list item or a watch event)."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        if event_type == "DELETED" or is_terminal(pod) or \
                (pod.get("spec") or {}).get("nodeName") != self.spec.name:
            self._release(uid)
            return
        with self._lock:
            if uid in self.pods:
                return  # devices are given once, at admission, and kept
            entry = PodEntry(
                namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                containers=[c.get("name", "") for c in (pod.get("spec") or {}).get("containers")
                            or ()],
                devices={}, workload=pod_workload(pod))
            for resource, per_container in device_wants(pod).items():
                free = [d for d in self.devices
                        if d.resource == resource and d.device_id not in self._held]
                for container, count in per_container:
                    taken, free = free[:count], free[count:]
                    if len(taken) < count:
                        log.warning("%s: %s/%s wants %d %s, %d free", self.spec.name,
                                    entry.namespace, entry.name, count, resource, len(taken))
                    for device in taken:
                        self._held[device.device_id] = uid
                    if taken:
                        entry.devices.setdefault(container, []).append(
                            (resource, [d.device_id for d in taken]))
            self.pods[uid] = entry
            changed = bool(entry.devices)
        if changed:
            self.write_node_file()

    def _release(self, uid: str) -> None:
        with self._lock:
            entry = self.pods.pop(uid, None)
            if entry is None:
                return
            self._held = {d: holder for d, holder in self._held.items() if holder != uid}
        if entry.devices:
            self.write_node_file()

    # --- the node file ------------------------------------------------------------------------

    def node_document(self) -> dict[str, Any]:
        """The node's GPUs and what each runs (one entry per physical GPU, in index order)."""
        model = self.spec.gpu_model
        with self._lock:
            holders = {d: self.pods[uid] for d, uid in self._held.items()}
        physical: dict[int, dict[str, Any]] = {}
        for device in self.devices:
            entry = physical.setdefault(device.index, {
                "index": device.index, "uuid": device.uuid, "name": device.model.model_name,
                "pciBusId": gpus.pci_bus_id(device.index), "memoryMiB": self.spec.gpu_memory_mib,
                "idleWatts": model.idle_watts if model else 0.0,
                "maxWatts": model.max_watts if model else 0.0,
                "workload": None, "heldBy": None,
            })
            pod = holders.get(device.device_id)
            if device.mig_uuid is not None:
                # a GPU in MIG mode: each instance its own device, held by one pod at most
                entry.setdefault("mig", []).append({
                    "uuid": device.mig_uuid, "gpuInstanceId": device.mig_instance,
                    "profile": device.mig_profile, "memoryMiB": device.memory_mib,
                    "workload": pod.workload if pod is not None else None,
                    "heldBy": f"{pod.namespace}/{pod.name}" if pod is not None else None})
            if pod is not None and entry["workload"] is None:
                entry["workload"] = pod.workload
                entry["heldBy"] = f"{pod.namespace}/{pod.name}"
            if pod is not None and device.replica is not None:
                processes = entry.setdefault("processes", [])
                if all(p["pod"] != pod.name or p["namespace"] != pod.namespace
                       for p in processes):
                    processes.append({
                        # a stable made-up PID per GPU and replica
                        "pid": 10_000 + device.index * 100 + device.replica,
                        "namespace": pod.namespace, "pod": pod.name,
                        "workload": pod.workload})
        return {"node": self.spec.name, "driverVersion": self.spec.driver_version,
                "gpus": [physical[i] for i in sorted(physical)]}

    def write_node_file(self) -> None:
        """Replace the node file whole (write, then rename), so a reader never sees half."""
        document = self.node_document()
        temporary = self.node_file.with_name(f".{self.node_file.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document, indent=1))
        os.replace(temporary, self.node_file)

    # --- the gRPC side ------------------------------------------------------------------------

    def list_response(self) -> Any:
        with self._lock:
            entries = list(self.pods.values())
        return ListPodResourcesResponse(pod_resources=[
            PodResources(name=e.name, namespace=e.namespace, containers=[
                ContainerResources(name=container, devices=[
                    ContainerDevices(resource_name=resource, device_ids=ids)
                    for resource, ids in e.devices.get(container, ())])
                for container in e.containers])
            for e in entries])

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self.list_response()

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> PodResourcesServer:
        self.node_file.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self.write_node_file()
        resource_version = self._relist()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=ListPodResourcesRequest.FromString,
                response_serializer=ListPodResourcesResponse.SerializeToString),
        }),))
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self._server = server
        self._thread = threading.Thread(target=self._follow, args=(resource_version,),
                                        name=f"pod-resources-{self.spec.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks the watch thread's read
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        self.socket_path.unlink(missing_ok=True)
