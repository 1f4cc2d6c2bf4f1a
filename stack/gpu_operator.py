"""A stand-in for the GPU operator's MIG manager and the NVIDIA device plugin's config switch, for
the simulated GPU nodes (kubesim's, the real control plane's KWOK nodes) that have no GPU to lay
out. It is driven as the real ones are, by node labels, and answers as they do:

- `nvidia.com/mig.config` changed on a MIG-capable node: `nvidia.com/mig.config.state` goes
  `pending`; if a pod still holds one of the node's GPUs it goes `failed` (the real manager
  cannot repartition a GPU in use); else the node's status is rewritten as the device plugin
  would advertise the new instances (mixed strategy: `nvidia.com/mig-<profile>`, all of them
  gone for `all-disabled`, which leaves whole `nvidia.com/gpu`s), GPU feature discovery's
  labels as it would relabel the node (`nvidia.com/mig-<profile>.count|.memory|.slices.gi`),
  and the state goes `success`.
- `nvidia.com/device-plugin.config` changed to `time-slicing-<n>` (the entries the portal
  names: catalogue/layouts.py): the GPUs are advertised n ways as `nvidia.com/gpu.shared`
  (renameByDefault), or as whole `nvidia.com/gpu`s for n = 1, and the node labelled
  `nvidia.com/gpu.replicas` and `nvidia.com/gpu.sharing-strategy` as GPU feature discovery
  does.

What it sees on its first list of the nodes is what it takes as applied; it acts on changes
from there, from a watch of the nodes. What one MIG instance's memory is comes from kubesim's
GPU catalogue (kubesim/gpus.py), what fits on one GPU from the portal's geometry
(catalogue/layouts.py: the MIG manager's config, shared by both sides as the operator's
ConfigMap is).

Run it beside kubesim (`python -m stack.gpu_operator --kubeconfig …`: make demo does), or as
the real control plane's addon `gpu-operator` (stack/k8s/addons.py).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import urllib3

from catalogue.layouts import (
    GPU_RESOURCE,
    LABEL_DEVICE_PLUGIN_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    SHARED_RESOURCE,
    gpu_count,
    is_gpu_resource,
    mig_layout,
    node_geometry,
    replicas_of_config,
)
from catalogue.sharing import LABEL_MIG_CONFIG, LABEL_REPLICAS, LABEL_SHARING_STRATEGY

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from .k8s.cluster import ControlPlane

log = logging.getLogger("stack.gpu_operator")
Obj = dict[str, Any]
WATCH_SECONDS = 2  # each watch call ends this often, so that stop() is seen soon


def _mig_label(key: str) -> bool:
    return key.startswith("nvidia.com/mig-") and key.rsplit(".", 1)[-1] in (
        "count", "memory", "slices.gi", "slices.ci", "engines.copy", "engines.decoder",
        "engines.encoder", "engines.jpeg", "engines.ofa", "multiprocessors")


def _resources_patch(node: Obj, units: dict[str, int]) -> Obj:
    """A merge patch of the node's status: its GPU resources replaced by `units`."""
    status = node.get("status") or {}
    patch: Obj = {}
    for field in ("capacity", "allocatable"):
        old = {k: None for k in (status.get(field) or {}) if is_gpu_resource(k)}
        patch[field] = {**old, **{k: str(v) for k, v in units.items()}}
    return {"status": patch}


def mig_patches(node: Obj, config: str) -> tuple[Obj, Obj]:
    """(labels patch, status patch) that lay the node out as MIG `config`. ValueError when
    its GPUs cannot take it (the state is then `failed`)."""
    from kubesim.gpus import lookup_model

    labels = node["metadata"].get("labels") or {}
    found = node_geometry(node)
    if found is None:
        raise ValueError("no MIG-capable GPU")
    per_gpu = mig_layout(config, found)
    count = gpu_count(node)
    memory = dict(lookup_model(labels.get("nvidia.com/gpu.product", "")).mig_profiles)
    new_labels: dict[str, str | None] = {k: None for k in labels if _mig_label(k)}
    units: dict[str, int] = {}
    for profile, n in per_gpu.items():
        units[f"nvidia.com/mig-{profile}"] = n * count
        new_labels[f"nvidia.com/mig-{profile}.count"] = str(n * count)
        new_labels[f"nvidia.com/mig-{profile}.memory"] = str(memory.get(profile, 0))
        new_labels[f"nvidia.com/mig-{profile}.slices.gi"] = profile.split("g", 1)[0]
    if not per_gpu:
        units[GPU_RESOURCE] = count
    new_labels[LABEL_MIG_CONFIG_STATE] = "success"
    return {"metadata": {"labels": new_labels}}, _resources_patch(node, units)


def time_slicing_patches(node: Obj, replicas: int) -> tuple[Obj, Obj]:
    count = gpu_count(node)
    units = {SHARED_RESOURCE: count * replicas} if replicas > 1 else {GPU_RESOURCE: count}
    labels: dict[str, str | None] = {LABEL_REPLICAS: str(replicas),
                                     LABEL_SHARING_STRATEGY: "time-slicing" if replicas > 1
                                     else None}
    return {"metadata": {"labels": labels}}, _resources_patch(node, units)


def gpus_held(pods: list[Obj]) -> list[str]:
    held = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            if any(k.startswith("nvidia.com/")
                   for k in ((container.get("resources") or {}).get("limits") or {})):
                held.append(pod["metadata"]["name"])
                break
    return held


class GpuOperatorStandIn:
    """The watch and what it does, in a thread of its own (start/stop)."""

    def __init__(self, api_client: Callable[[], ApiClient]) -> None:
        self._api_client = api_client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.applied: dict[str, tuple[str, str]] = {}  # node → (MIG config, plugin config)
        self.ready = threading.Event()

    def start(self, *, wait: float = 60) -> None:
        """Start watching; with `wait`, until the nodes are listed (what it takes as laid out
        already)."""
        self._thread = threading.Thread(target=self._run, name="gpu-operator-stand-in",
                                        daemon=True)
        self._thread.start()
        if wait and not self.ready.wait(wait):
            raise RuntimeError("the GPU operator's stand-in did not list the nodes")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WATCH_SECONDS * 5)

    @staticmethod
    def _wanted(node: Obj) -> tuple[str, str]:
        labels = node["metadata"].get("labels") or {}
        return labels.get(LABEL_MIG_CONFIG, ""), labels.get(LABEL_DEVICE_PLUGIN_CONFIG, "")

    def _connect(self) -> tuple[ApiClient, Any, Obj] | None:
        """The client, the core API and the first list of the nodes, once the cluster answers
        (under make demo it may still be starting: its kubeconfig not yet written)."""
        from kubernetes import client
        from kubernetes.config import ConfigException

        while not self._stop.is_set():
            try:
                api = self._api_client()
            except (OSError, ConfigException) as exc:
                log.info("no cluster to reach yet (%s)", exc)
                self._stop.wait(1)
                continue
            core = client.CoreV1Api(api)
            try:
                return api, core, api.sanitize_for_serialization(core.list_node())
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                log.info("the cluster does not answer yet (%s)", exc)
                api.close()
                self._stop.wait(1)
        return None

    def _run(self) -> None:
        from kubernetes import client, watch

        connected = self._connect()
        if connected is None:
            return
        api, core, listed = connected
        try:
            for node in listed["items"]:
                self.applied[node["metadata"]["name"]] = self._wanted(node)
            version = listed["metadata"]["resourceVersion"]
            self.ready.set()
            while not self._stop.is_set():
                try:
                    for event in watch.Watch().stream(core.list_node, resource_version=version,
                                                      timeout_seconds=WATCH_SECONDS):
                        node = api.sanitize_for_serialization(event["object"])
                        version = node["metadata"].get("resourceVersion", version)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.reconcile(core, node)
                        if self._stop.is_set():
                            break
                except (client.rest.ApiException, OSError,
                        urllib3.exceptions.HTTPError) as exc:
                    if getattr(exc, "status", None) != 410:
                        log.warning("the node watch failed: %s", exc)
                        self._stop.wait(1)
                    try:
                        listed = api.sanitize_for_serialization(core.list_node())
                    except (OSError, urllib3.exceptions.HTTPError):
                        continue  # still away: the next turn tries again
                    version = listed["metadata"]["resourceVersion"]
                    for node in listed["items"]:
                        self.reconcile(core, node)
        finally:
            api.close()

    def reconcile(self, core: Any, node: Obj) -> None:
        name = node["metadata"]["name"]
        mig, plugin = self._wanted(node)
        done_mig, done_plugin = self.applied.setdefault(name, (mig, plugin))
        if mig != done_mig:
            self._lay_out_mig(core, node, mig)
            self.applied[name] = (mig, done_plugin)
        if plugin != done_plugin:
            replicas = replicas_of_config(plugin)
            if replicas is not None:
                labels, status = time_slicing_patches(node, replicas)
                core.patch_node_status(name, status)
                core.patch_node(name, labels)
                log.info("%s: time-sliced %s ways", name, replicas)
            self.applied[name] = (self.applied[name][0], plugin)

    def _lay_out_mig(self, core: Any, node: Obj, config: str) -> None:
        name = node["metadata"]["name"]
        core.patch_node(name, {"metadata": {"labels": {LABEL_MIG_CONFIG_STATE: "pending"}}})
        pods = core.api_client.sanitize_for_serialization(
            core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}"))["items"]
        held = gpus_held(pods)
        try:
            if held:
                raise ValueError(f"GPUs in use by {', '.join(held)}")
            labels, status = mig_patches(node, config)
        except ValueError as exc:
            log.warning("%s: MIG config %s failed: %s", name, config, exc)
            core.patch_node(name, {"metadata": {"labels": {LABEL_MIG_CONFIG_STATE: "failed"}}})
            return
        core.patch_node_status(name, status)
        core.patch_node(name, labels)
        log.info("%s: MIG laid out as %s", name, config)


class GpuOperatorAddon:
    """The stand-in as an addon of the real control plane (stack/k8s/addons.py)."""

    name = "gpu-operator"

    def __init__(self) -> None:
        self.stand_in: GpuOperatorStandIn | None = None

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def start(self, cp: ControlPlane) -> None:
        self.stand_in = GpuOperatorStandIn(cp.api_client)
        self.stand_in.start()

    def stop(self) -> None:
        if self.stand_in is not None:
            self.stand_in.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from kubernetes import config

    stand_in = GpuOperatorStandIn(lambda: config.new_client_from_config(
        config_file=args.kubeconfig))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    stand_in.start(wait=0)
    done.wait()
    stand_in.stop()


if __name__ == "__main__":
    main()
