"""The GPU operator's stand-in (stack/gpu_operator.py) for a test, and a node put back as it was.

A test session shares its clusters: a test that lays a node out anew puts it back, labels and
advertised GPUs, as it found it (`node_restored`), after the stand-in has stopped (so that the
stand-in does not take the putting back for a layout to apply)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from stack.gpu_operator import GpuOperatorStandIn

GPU_PREFIX = "nvidia.com/"


@contextlib.contextmanager
def gpu_operator_running(api_client: Callable[[], Any]) -> Iterator[GpuOperatorStandIn]:
    stand_in = GpuOperatorStandIn(api_client)
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@contextlib.contextmanager
def node_restored(api: Any, name: str) -> Iterator[dict[str, Any]]:
    """Yields the node as it was (`api`: a kubernetes ApiClient); puts back its GPU labels and
    resources at the end, and its cordon: a test that fails inside a maintenance window never
    reaches the window's end, and the node left cordoned would change what every later test
    of the cluster sees the scheduler say."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    before = api.sanitize_for_serialization(core.read_node(name))
    try:
        yield before
    finally:
        node = api.sanitize_for_serialization(core.read_node(name))
        old_labels = before["metadata"].get("labels") or {}
        labels = {k: None for k in (node.get("metadata") or {}).get("labels") or {}
                  if k.startswith(GPU_PREFIX) and k not in old_labels}
        labels.update({k: v for k, v in old_labels.items() if k.startswith(GPU_PREFIX)})
        status: dict[str, Any] = {}
        for field in ("capacity", "allocatable"):
            now = (node.get("status") or {}).get(field) or {}
            was = before["status"].get(field) or {}
            status[field] = {**{k: None for k in now if k.startswith(GPU_PREFIX)},
                             **{k: v for k, v in was.items() if k.startswith(GPU_PREFIX)}}
        core.patch_node_status(name, {"status": status})
        core.patch_node(name, {"metadata": {"labels": labels},
                               "spec": {"unschedulable": before["spec"].get("unschedulable")}})
