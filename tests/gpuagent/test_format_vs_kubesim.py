"""The exporter format against kubesim's: a GPU node of the demo cluster, once as kubesim serves
it and once as the agent serves it (fake NVML with the same GPUs, and a kubelet pod-resources
server answering with the same pods): the same metric names, types, HELP, label sets and units."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpuagent.exporter import DcgmCollector, render
from gpuagent.nvml import A100_80GB, FakeGpu, FakeProcess, FakeReader
from gpuagent.podresources import KubeletPodResources
from gpuagent.processes import StaticProcessMapping
from gpuagent.sampler import Sampler
from tests.gpuagent.conftest import FakeKubelet, pod_resources
from tests.support.waiting import eventually

A100_MIB = 81920
HOLDER_LABELS = ("container", "namespace", "pod")
POD_FAMILIES = ("gpuagent_pod_gpu_util", "gpuagent_pod_mem_copy_util", "gpuagent_pod_fb_used")


def parse(text: str) -> dict[str, tuple[str, str, list[Sample]]]:
    """name → (type, HELP, samples) of the DCGM families."""
    return {
        f.name: (f.type, f.documentation, f.samples)
        for f in text_string_to_metric_families(text)
        if f.name.startswith("DCGM_")
    }


def kubesim_metrics(url: str) -> dict[str, tuple[str, str, list[Sample]]]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        return parse(response.read().decode())


@pytest.fixture
def gpu_pod(kubesim, kube_namespace: str) -> Iterator[tuple[str, str]]:
    """A pod holding one A100, running in kubesim; yields (namespace, pod)."""
    with kubesim.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(
            kube_namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "trainer-0"},
                "spec": {
                    "nodeSelector": {"gputype": "a100"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        )
        yield kube_namespace, "trainer-0"
        core.delete_namespaced_pod("trainer-0", kube_namespace, grace_period_seconds=0)


def held_series(url: str, namespace: str, pod: str) -> Sample:
    def held() -> Sample | None:
        return next((sample for sample in kubesim_metrics(url)["DCGM_FI_DEV_GPU_UTIL"][2]
                     if sample.labels.get("namespace") == namespace
                     and sample.labels.get("pod") == pod), None)

    return eventually(held, timeout=20,
                      message=f"kubesim never reported a GPU held by {namespace}/{pod}")


def test_agent_output_matches_kubesim_for_the_same_node(
    kubesim, gpu_pod: tuple[str, str], kubelet: FakeKubelet
) -> None:
    namespace, pod = gpu_pod
    held = held_series(kubesim.url, namespace, pod)
    node = held.labels["Hostname"]
    theirs = kubesim_metrics(kubesim.url)

    # The node's GPUs as kubesim reports them: its identities become the fake NVML's, and the
    # GPUs its pods hold become the kubelet's pod-resources answer.
    on_node = {
        int(s.labels["gpu"]): s.labels
        for s in theirs["DCGM_FI_DEV_GPU_UTIL"][2]
        if s.labels["Hostname"] == node
    }
    gpus = []
    for index in range(max(on_node) + 1):
        labels = on_node.get(index)
        gpu = FakeGpu(uuid=f"GPU-lost-{index}", memory_total_bytes=A100_80GB, lost=labels is None)
        if labels is not None:
            gpu.uuid, gpu.name, gpu.pci_bus_id = (
                labels["UUID"], labels["modelName"], labels["pci_bus_id"],
            )  # fmt: skip
        gpus.append(gpu)
    kubelet.pods = [
        pod_resources(
            labels["namespace"],
            labels["pod"],
            {labels["container"]: [("nvidia.com/gpu", [labels["UUID"]])]},
        )
        for labels in on_node.values()
        if "pod" in labels
    ]
    reader = FakeReader(gpus, driver_version=held.labels["DCGM_FI_DRIVER_VERSION"])
    sampler = Sampler(reader, KubeletPodResources(kubelet.socket_path), hostname=node)
    try:
        sampler.sample_once()
        ours = parse(render(DcgmCollector(sampler).collect()))
    finally:
        sampler.stop()

    assert list(ours) == list(theirs)  # the same families, in the same order
    for name, (kind, help_text, samples) in theirs.items():
        assert ours[name][:2] == (kind, help_text), name
        their_labels = [s.labels for s in samples if s.labels["Hostname"] == node]
        our_labels = [s.labels for s in ours[name][2]]
        # The same series with the same label sets, and the labels in the same order.
        assert sorted(map(sorted_items, our_labels)) == sorted(map(sorted_items, their_labels))
        assert {tuple(labels) for labels in our_labels} == {
            tuple(labels) for labels in their_labels
        }

    # The held GPU and a free one: dcgm-exporter's label set, with and without the pod's.
    held_labels = one(ours["DCGM_FI_DEV_GPU_UTIL"][2], UUID=held.labels["UUID"]).labels
    assert held_labels == held.labels
    assert {k: held_labels[k] for k in HOLDER_LABELS} == {
        "container": "trainer", "namespace": namespace, "pod": pod,
    }  # fmt: skip
    free = [s for s in ours["DCGM_FI_DEV_GPU_UTIL"][2] if "pod" not in s.labels]
    assert free and all(set(held_labels) - set(s.labels) == set(HOLDER_LABELS) for s in free)

    # Units: MiB of an 80 GB A100, watts, °C, percent — on both sides.
    their_node = {n: [s for s in t[2] if s.labels["Hostname"] == node] for n, t in theirs.items()}
    our_node = {n: t[2] for n, t in ours.items()}
    for side in (their_node, our_node):
        for gpu in on_node:
            value = {n: one(samples, gpu=str(gpu)).value for n, samples in side.items()}
            assert (value["DCGM_FI_DEV_FB_USED"] + value["DCGM_FI_DEV_FB_FREE"]
                    + value["DCGM_FI_DEV_FB_RESERVED"]) == A100_MIB
            assert 10 < value["DCGM_FI_DEV_POWER_USAGE"] < 1000
            assert 10 < value["DCGM_FI_DEV_GPU_TEMP"] < 120
            assert 0 <= value["DCGM_FI_DEV_GPU_UTIL"] <= 100


def sorted_items(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def one(samples: list[Sample], **labels: str) -> Sample:
    found = [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, found)
    return found[0]


def shared_families(text: str) -> dict[str, tuple[str, str, list[Sample]]]:
    """name → (type, HELP, samples) of the DCGM and per-pod families."""
    return {
        f.name: (f.type, f.documentation, f.samples)
        for f in text_string_to_metric_families(text)
        if f.name.startswith("DCGM_") or f.name in POD_FAMILIES
    }


@pytest.fixture
def shared_pods(kubesim, kube_namespace: str) -> Iterator[tuple[str, list[str]]]:
    """Two pods, each holding a replica of a time-sliced T4: one busy, one idle."""
    names = ["busy-0", "idle-0"]
    with kubesim.api_client() as api:
        core = client.CoreV1Api(api)
        for name, trace in zip(names, ("busy", "idle"), strict=True):
            core.create_namespaced_pod(kube_namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "annotations": {"kubesim.io/gpu-trace": trace}},
                "spec": {
                    "nodeSelector": {"gputype": "t4-shared"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                     "effect": "NoSchedule"}],
                    "containers": [{"name": "notebook", "image": "jupyter/base-notebook",
                                    "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}],
                },
            })
        yield kube_namespace, names
        for name in names:
            core.delete_namespaced_pod(name, kube_namespace, grace_period_seconds=0)


def test_a_time_sliced_node_matches_kubesim_with_each_pods_own_figures(
    kubesim, shared_pods: tuple[str, list[str]], kubelet: FakeKubelet
) -> None:
    namespace, names = shared_pods

    def both_held() -> dict[str, Sample] | None:
        with urllib.request.urlopen(kubesim.url + "/metrics", timeout=5) as response:
            families = shared_families(response.read().decode())
        own = {s.labels["pod"]: s for s in families["gpuagent_pod_gpu_util"][2]
               if s.labels["namespace"] == namespace}
        return own if set(own) == set(names) else None

    theirs_own = eventually(both_held, timeout=20,
                            message="kubesim never reported both pods on the shared GPU")
    busy, idle = (theirs_own[name] for name in names)
    assert busy.labels["UUID"] == idle.labels["UUID"]  # replicas of one GPU
    assert busy.labels["scope"] == "process" and idle.value < 2 < busy.value
    node, uuid = busy.labels["Hostname"], busy.labels["UUID"]
    with urllib.request.urlopen(kubesim.url + "/metrics", timeout=5) as response:
        theirs = shared_families(response.read().decode())
    theirs_own = {s.labels["pod"]: s for s in theirs["gpuagent_pod_gpu_util"][2]
                  if s.labels["namespace"] == namespace}

    # The same node as the agent sees it: the GPU from kubesim's labels, one process per pod
    # running what kubesim says each pod runs, the kubelet naming both pods as holders.
    labels = busy.labels
    processes = [FakeProcess(100 + i, (theirs_own[name].value,), 2**30)
                 for i, name in enumerate(names)]
    gpu = FakeGpu(uuid=uuid, name=labels["modelName"], pci_bus_id=labels["pci_bus_id"],
                  memory_total_bytes=15360 * 2**20, processes=processes)
    kubelet.pods = [
        pod_resources(namespace, name, {"notebook": [("nvidia.com/gpu.shared", [f"{uuid}::{i}"])]})
        for i, name in enumerate(names)
    ]
    pods = StaticProcessMapping({100 + i: (namespace, name) for i, name in enumerate(names)})
    reader = FakeReader([gpu], driver_version=labels["DCGM_FI_DRIVER_VERSION"])
    sampler = Sampler(reader, KubeletPodResources(kubelet.socket_path), hostname=node,
                      processes=pods)
    try:
        sampler.sample_once()
        sampler.sample_once()  # per-process samples are of the period before
        ours = shared_families(render(DcgmCollector(sampler).collect()))
    finally:
        sampler.stop()

    assert list(ours) == list(theirs)  # the same families, in the same order
    for name, (kind, help_text, samples) in theirs.items():
        assert ours[name][:2] == (kind, help_text), name
        their_labels = [s.labels for s in samples if s.labels.get("UUID") == uuid]
        our_labels = [s.labels for s in ours[name][2]]
        assert sorted(map(sorted_items, our_labels)) == sorted(map(sorted_items, their_labels))
        assert {tuple(labels) for labels in our_labels} == {
            tuple(labels) for labels in their_labels
        }, name

    # On both sides: the device series are the whole GPU's (the sum), each pod's its own.
    for side in (theirs, ours):
        device = [s for s in side["DCGM_FI_DEV_GPU_UTIL"][2] if s.labels["UUID"] == uuid]
        own = {s.labels["pod"]: s.value for s in side["gpuagent_pod_gpu_util"][2]
               if s.labels["UUID"] == uuid}
        assert {s.labels["pod"] for s in device} == set(names)
        assert all(s.value == min(100.0, round(sum(own.values()), 1)) for s in device)
        assert own[names[1]] < 2
