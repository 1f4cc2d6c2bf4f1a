"""Helpers for the cluster-half tests: small manifest builders (waits: tests/support/waiting.py's
`eventually`, with `ignoring=(ApiException,)` where the object may not be there yet)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

REPO = Path(__file__).resolve().parents[2]
DEMO_INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
MIG_INVENTORY = REPO / "deploy" / "kubesim" / "mig-inventory.yaml"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def status_body(exc: ApiException) -> dict:
    return json.loads(exc.body)


def container(name: str = "app", image: str = "busybox:1.36", *, gpus: int = 0,
              resource: str = "nvidia.com/gpu", cpu: str | None = None,
              memory: str | None = None, env: dict[str, str] | None = None, **extra: Any) -> dict:
    c: dict[str, Any] = {"name": name, "image": image, **extra}
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if gpus:
        limits[resource] = str(gpus)
    if cpu:
        requests["cpu"] = cpu
        limits["cpu"] = cpu
    if memory:
        requests["memory"] = memory
        limits["memory"] = memory
    if limits or requests:
        c["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return c


def pod_spec(*containers: dict, tolerate_gpu: bool = False, node_selector: dict | None = None,
             restart: str | None = None, **extra: Any) -> dict:
    spec: dict[str, Any] = {"containers": list(containers) or [container()], **extra}
    if tolerate_gpu:
        spec["tolerations"] = [GPU_TOLERATION]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if restart:
        spec["restartPolicy"] = restart
    return spec


def pod(name: str, spec: dict, *, labels: dict | None = None,
        annotations: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def deployment(name: str, spec: dict, *, replicas: int = 1, annotations: dict | None = None,
               labels: dict | None = None) -> dict:
    labels = labels or {"app": name}
    template_meta: dict[str, Any] = {"labels": labels}
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": template_meta, "spec": spec}},
    }


def job(name: str, spec: dict, *, annotations: dict | None = None, **job_spec: Any) -> dict:
    spec = dict(spec)
    spec.setdefault("restartPolicy", "Never")
    template: dict[str, Any] = {"spec": spec}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **job_spec}}


def write_inventory(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def events_for(core: client.CoreV1Api, namespace: str, name: str) -> list:
    return core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items


def event_reasons(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in events_for(core, namespace, name)]


def condition(obj: Any, type_: str) -> Any:
    for cond in (obj.status.conditions or []):
        if cond.type == type_:
            return cond
    return None


def stream_lines(
    server,
    path: str,
    *,
    limit: int | None = None,
    timeout: float = 10.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, list[dict]]:
    """Read a watch response line by line (at most `limit` events)."""
    url = urlparse(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    conn.request("GET", path, headers={**server.headers(), **(headers or {})})
    resp = conn.getresponse()
    events = []
    try:
        while limit is None or len(events) < limit:
            line = resp.readline()
            if not line:
                break
            events.append(json.loads(line))
    finally:
        conn.close()
    return resp.status, events
