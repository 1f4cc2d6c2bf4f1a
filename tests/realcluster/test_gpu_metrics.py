"""GPU metrics of pods on the real control plane's KWOK nodes (stack/k8s/gpumetrics.py).

Per GPU node the project's own agent runs as on a real node (a fake NVML instead of the driver),
and finds the pod holding each GPU through the node's pod-resources socket, which follows the
pods the scheduler bound to that node. The portal's scraper reads the agents like any exporter,
found through PORTAL_GPU_EXPORTER_URLS."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.inventory import load_inventory, node_devices
from stack.k8s.cluster import DEMO_INVENTORY
from tests.support.waiting import eventually
from usage.scrape import DeviceReading, discover_targets, scrape_targets


def gpu_pod(name: str, gpus: int, trace: str | None = None) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name,
                     "annotations": {"kubesim.io/gpu-trace": trace} if trace else {}},
        "spec": {
            "nodeSelector": {"gputype": "a100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "pytorch/pytorch:2.3.0-cuda12.1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }


@pytest.fixture
def exporters(real_cluster, settings) -> list[str]:
    (addon,) = [a for a in real_cluster.addons if a.name == "gpumetrics"]
    settings.PORTAL_PROMETHEUS_URL = ""
    settings.PORTAL_GPU_EXPORTER_URLS = list(addon.urls)
    return addon.urls


@pytest.fixture
def core(real_cluster) -> Iterator[client.CoreV1Api]:
    with real_cluster.api_client() as api:
        yield client.CoreV1Api(api)


def readings() -> list[DeviceReading]:
    results = scrape_targets(discover_targets(), timeout=5)
    failed = [r.error for r, _ in results if not r.ok]
    assert failed == []
    return [reading for result, _ in results for reading in result.readings]


def test_every_gpu_of_the_inventory_is_scraped_through_the_setting(exporters):
    inventory = load_inventory(str(DEMO_INVENTORY))
    targets = discover_targets()
    assert sorted(t.url for t in targets) == sorted(exporters)
    assert {t.source for t in targets} == {"exporter"}
    expected = {(d.node, d.uuid) for n in inventory.nodes for d in node_devices(n)}
    assert {(r.node, r.uuid) for r in readings()} == expected


def test_pods_holding_a100s_are_scraped_with_their_namespace_pod_and_workload(
        exporters, core, real_namespace):
    core.create_namespaced_pod(real_namespace, gpu_pod("trainer", 2))
    core.create_namespaced_pod(real_namespace, gpu_pod("notebook", 1, trace="idle"))

    def running() -> dict[str, str] | None:
        pods = core.list_namespaced_pod(real_namespace).items
        if len(pods) == 2 and all(p.status.phase == "Running" for p in pods):
            return {p.metadata.name: p.spec.node_name for p in pods}
        return None

    nodes = eventually(running, timeout=30, interval=0.2, message="both pods Running")

    def held() -> dict[str, list[DeviceReading]]:
        found: dict[str, list[DeviceReading]] = {}
        for reading in readings():
            if reading.namespace == real_namespace:
                found.setdefault(reading.pod, []).append(reading)
        return found if {p: len(r) for p, r in found.items()} == \
            {"trainer": 2, "notebook": 1} else {}

    found = eventually(held, timeout=30, interval=0.2, message="the pods' GPUs with their labels")
    inventory = {n.name: n for n in load_inventory(str(DEMO_INVENTORY)).nodes}
    for pod, pod_readings in found.items():
        for reading in pod_readings:
            assert reading.node == nodes[pod]
            assert reading.uuid in {d.uuid for d in node_devices(inventory[nodes[pod]])}
            assert reading.model == "NVIDIA A100-SXM4-80GB"
    assert min(r.util for r in found["trainer"]) > 30  # busy: the default workload
    assert found["notebook"][0].util < 2  # what idle culling looks for

    core.delete_namespaced_pod("notebook", real_namespace, grace_period_seconds=0)
    eventually(lambda: not [r for r in readings() if r.namespace == real_namespace
                            and r.pod == "notebook"], timeout=30, interval=0.2, message="the notebook's GPU released")
