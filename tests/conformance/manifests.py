"""Plain-dict manifests for the conformance checks (no I/O).

Pods run on either cluster: kubesim's kubelet and the real control plane's KWOK stages both
read `kubesim.io/run-seconds` / `kubesim.io/exit-code` (annotations) for how long a container
runs and how it exits.
"""

from __future__ import annotations

from typing import Any

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
IMAGE = "busybox:1.36"


def container(name: str = "app", *, image: str = IMAGE, gpus: int = 0,
              cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if cpu:
        limits["cpu"] = cpu
    if memory:
        limits["memory"] = memory
    if limits:
        c["resources"] = {"limits": limits, "requests": dict(limits)}
    return c


def pod_spec(*containers: dict, tolerate_gpu: bool = False,
             node_selector: dict[str, str] | None = None, restart: str | None = None,
             **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [container()], **extra}
    if tolerate_gpu:
        spec["tolerations"] = [GPU_TOLERATION]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if restart:
        spec["restartPolicy"] = restart
    return spec


def run_annotations(run_seconds: float | None = None,
                    exit_code: int | None = None) -> dict[str, str]:
    notes: dict[str, str] = {}
    if run_seconds is not None:
        notes["kubesim.io/run-seconds"] = str(run_seconds)
    if exit_code is not None:
        notes["kubesim.io/exit-code"] = str(exit_code)
    return notes


def meta(name: str | None = None, *, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None,
         generate_name: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {}
    if name:
        m["name"] = name
    if generate_name:
        m["generateName"] = generate_name
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    return m


def pod(name: str | None, spec: dict | None = None, *, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        generate_name: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": meta(name, labels=labels, annotations=annotations,
                             generate_name=generate_name),
            "spec": spec or pod_spec()}


def configmap(name: str, data: dict[str, str] | None = None, *,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, labels=labels),
            "data": data or {}}


def deployment(name: str, *, replicas: int = 1, spec: dict | None = None,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": meta(labels=labels, annotations=annotations),
                         "spec": spec or pod_spec()},
        },
    }


def job(name: str, *, run_seconds: float = 1, exit_code: int | None = None,
        backoff_limit: int = 0, spec_extra: dict | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            **(spec_extra or {}),
            "template": {
                "metadata": meta(annotations=run_annotations(run_seconds, exit_code)),
                "spec": pod_spec(restart="Never"),
            },
        },
    }


def quota(name: str, hard: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": hard}}


def service(name: str, *, type_: str = "ClusterIP", selector: dict[str, str] | None = None,
            port: int = 80) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": type_, "selector": selector or {"app": name},
                     "ports": [{"name": "http", "port": port, "targetPort": port}]}}
