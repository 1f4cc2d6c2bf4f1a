"""deploy/gpu-nodes/label-gpu-nodes.sh against kubesim's nodes, which carry GPU feature
discovery's nvidia.com/gpu.product label like real GPU nodes."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.deploy.manifests import KUBECTL, REPO

SCRIPT = REPO / "deploy" / "gpu-nodes" / "label-gpu-nodes.sh"
INVENTORY = """\
nodePools:
  - {name: a100, count: 2, namePrefix: gpu-a100-, cpu: 64, memory: 512Gi,
     gpu: {model: A100-SXM4-80GB, count: 8}}
  - {name: t4, count: 1, namePrefix: gpu-t4-, cpu: 16, memory: 64Gi, gpu: {model: T4, count: 4}}
  - {name: cpu, count: 1, namePrefix: cpu-, cpu: 16, memory: 64Gi}
"""
pytestmark = [pytest.mark.kubectl]


@pytest.fixture(scope="module")
def cluster(kubesim_factory, tmp_path_factory):
    inventory = tmp_path_factory.mktemp("gpu-nodes") / "inventory.yaml"
    inventory.write_text(INVENTORY)
    return kubesim_factory(inventory=inventory)


def label(cluster, *mappings: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECTL=str(KUBECTL), KUBECONFIG=cluster.kubeconfig)
    return subprocess.run(["sh", str(SCRIPT), *mappings], env=env, capture_output=True,
                          text=True, timeout=60)


def nodes(cluster) -> dict[str, tuple[str | None, list[dict]]]:
    out = subprocess.run([str(KUBECTL), "--kubeconfig", cluster.kubeconfig, "get", "nodes",
                          "-o", "json"], capture_output=True, text=True, timeout=30, check=True)
    return {n["metadata"]["name"]: (n["metadata"]["labels"].get("gputype"),
                                    n["spec"].get("taints", []))
            for n in json.loads(out.stdout)["items"]}


def test_labels_and_taints_the_gpu_nodes_by_product(cluster):
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    before = nodes(cluster)
    assert before and all(gputype is None and taints == [] for gputype, taints in before.values())
    result = label(cluster, "NVIDIA-A100-SXM4-80GB=a100", "Tesla-T4=t4", "Tesla-V100-SXM2-32GB=v100")
    assert result.returncode == 0, result.stderr
    assert "no node has nvidia.com/gpu.product=Tesla-V100-SXM2-32GB" in result.stderr
    expected = {"gpu-a100-1": ("a100", [taint]), "gpu-a100-2": ("a100", [taint]),
                "gpu-t4-1": ("t4", [taint]), "cpu-1": (None, [])}
    assert nodes(cluster) == expected
    again = label(cluster, "NVIDIA-A100-SXM4-80GB=a100", "Tesla-T4=t4")  # idempotent
    assert again.returncode == 0, again.stderr
    assert nodes(cluster) == expected


@pytest.mark.parametrize("args", [[], ["a100"], ["=a100"], ["NVIDIA-A100-SXM4-80GB="]])
def test_refuses_what_is_not_product_equals_gputype(cluster, args):
    before = nodes(cluster)
    result = label(cluster, *args)
    assert result.returncode == 2 and "PRODUCT=GPUTYPE" in result.stderr
    assert nodes(cluster) == before
