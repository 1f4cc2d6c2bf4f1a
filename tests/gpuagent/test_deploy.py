"""deploy/components/gpuagent: valid Kubernetes objects, and what a GPU-node agent needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "components" / "gpuagent"
SOCKET_DIR = "/var/lib/kubelet/pod-resources"


def documents() -> list[dict[str, Any]]:
    """The component's resources, as its kustomization.yaml lists them."""
    component = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    return [
        doc
        for name in component["resources"]
        for doc in yaml.safe_load_all((DEPLOY / name).read_text())
        if doc
    ]


def by_kind(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in documents() if d["kind"] == kind]
    return doc


def test_every_document_is_valid() -> None:
    assert sorted(d["kind"] for d in documents()) == [
        "DaemonSet", "NetworkPolicy", "Service", "ServiceAccount"]
    version = kubernetes_validate.utils.latest_version()
    for doc in documents():
        kubernetes_validate.validate(doc, version, strict=True)


def test_daemonset_runs_on_gpu_nodes_only_and_tolerates_their_taint() -> None:
    pod = by_kind("DaemonSet")["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


def test_daemonset_mounts_the_pod_resources_socket_and_is_locked_down() -> None:
    daemonset = by_kind("DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == SOCKET_DIR]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["hostPath"]["path"] == SOCKET_DIR
    assert f"--pod-resources-socket={SOCKET_DIR}/kubelet.sock" in container["args"]

    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert "nvidia.com/gpu" not in container["resources"]["limits"]  # watches, never takes one
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_daemonset_sees_host_pids_and_the_pod_log_directory_read_only() -> None:
    """What attributing a shared GPU's processes to pods needs: the host's PIDs (NVML's) and
    the kubelet's pod log directory names; nothing writable, still no API token."""
    pod = by_kind("DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["hostPID"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/var/log/pods"]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["hostPath"]["path"] == "/var/log/pods"
    assert "--pod-logs=/var/log/pods" in container["args"]


@pytest.mark.parametrize("kind", ["DaemonSet", "Service"])
def test_prometheus_scrape_annotations_on_port_9400(kind: str) -> None:
    doc = by_kind(kind)
    meta = doc["spec"]["template"]["metadata"] if kind == "DaemonSet" else doc["metadata"]
    assert meta["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9400",
        "prometheus.io/path": "/metrics",
    }


def test_service_selects_the_agents() -> None:
    service = by_kind("Service")
    labels = by_kind("DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9400, "targetPort": "metrics", "protocol": "TCP"}
    ]


def test_network_policy_admits_the_metrics_port_of_the_agents_only() -> None:
    policy = by_kind("NetworkPolicy")["spec"]
    labels = by_kind("DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in policy["podSelector"]["matchLabels"].items())
    assert policy["ingress"] == [{"ports": [{"protocol": "TCP", "port": "metrics"}]}]
