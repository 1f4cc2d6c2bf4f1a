"""GPU → pod mapping through the kubelet pod-resources API, against a real gRPC server."""

from __future__ import annotations

import grpc
import pytest

from gpuagent.exporter import DcgmCollector, render
from gpuagent.nvml import FakeGpu, FakeReader
from gpuagent.podresources import (
    Holder,
    KubeletPodResources,
    PodMappingError,
    gpu_uuid,
)
from gpuagent.sampler import Sampler
from tests.gpuagent.conftest import FakeKubelet, pod_resources

GPU0 = "GPU-0b5c3a2e-1111-4c3d-9e8f-000000000000"
GPU1 = "GPU-0b5c3a2e-1111-4c3d-9e8f-000000000001"
GPU2 = "GPU-0b5c3a2e-1111-4c3d-9e8f-000000000002"


def test_list_maps_each_gpu_uuid_to_its_container(kubelet: FakeKubelet) -> None:
    kubelet.pods = [
        pod_resources(
            "vision-lab",
            "train-0",
            {
                "sidecar": [],
                "trainer": [("nvidia.com/gpu", [GPU0, GPU1]), ("example.com/nic", ["eth1"])],
            },
        ),
        pod_resources("nlp", "jupyter-bob", {"notebook": [("nvidia.com/gpu", [GPU2])]}),
        pod_resources("kube-system", "coredns", {"coredns": []}),
    ]
    mapper = KubeletPodResources(kubelet.socket_path)
    try:
        assert mapper.holders() == {
            GPU0: (Holder("vision-lab", "train-0", "trainer"),),
            GPU1: (Holder("vision-lab", "train-0", "trainer"),),
            GPU2: (Holder("nlp", "jupyter-bob", "notebook"),),
        }
        kubelet.pods = []  # the pods ended: asked again every cycle, on the same channel
        assert mapper.holders() == {}
        assert kubelet.calls == 2
    finally:
        mapper.close()


def test_time_sliced_replicas_and_mig_slices(kubelet: FakeKubelet) -> None:
    kubelet.pods = [
        pod_resources("a", "p1", {"c": [("nvidia.com/gpu", [f"{GPU0}::0"])]}),
        pod_resources("b", "p2", {"c": [("nvidia.com/gpu", [f"{GPU0}::1"])]}),
        # renamed replicas; one container holding two replicas of one GPU is listed once
        pod_resources("e", "p5", {"c": [("nvidia.com/gpu.shared", [f"{GPU1}::0", f"{GPU1}::3"])]}),
        pod_resources("f", "p6", {"c": [("nvidia.com/gpu.shared", [f"{GPU1}::1"])]}),
        pod_resources("c", "p3", {"c": [("nvidia.com/mig-1g.10gb", ["MIG-aaaa"])]}),
        pod_resources("d", "p4", {"c": [("nvidia.com/gpu", ["MIG-bbbb"])]}),
    ]
    mapper = KubeletPodResources(kubelet.socket_path)
    try:
        # Every pod holding a replica is known, so each can be given its own figures.
        assert mapper.holders() == {
            GPU0: (Holder("a", "p1", "c", shared=True), Holder("b", "p2", "c", shared=True)),
            GPU1: (Holder("e", "p5", "c", shared=True), Holder("f", "p6", "c", shared=True)),
            "MIG-aaaa": (Holder("c", "p3", "c"),),
            "MIG-bbbb": (Holder("d", "p4", "c"),),
        }
    finally:
        mapper.close()


def test_a_time_sliced_gpu_has_a_series_for_each_pod_on_it(kubelet: FakeKubelet) -> None:
    reader = FakeReader([FakeGpu(uuid=GPU0, util_trace=(37.0,))])
    kubelet.pods = [
        pod_resources("a", "p1", {"c": [("nvidia.com/gpu.shared", [f"{GPU0}::0"])]}),
        pod_resources("b", "p2", {"c": [("nvidia.com/gpu.shared", [f"{GPU0}::2"])]}),
    ]
    sampler = Sampler(reader, KubeletPodResources(kubelet.socket_path, timeout=0.5), "node1")
    try:
        snapshot = sampler.sample_once()
        assert snapshot.gpus[0].shared
        text = render(DcgmCollector(sampler).collect())
        util = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
        assert len(util) == 2
        assert 'namespace="a",pod="p1"} 37' in util[0]
        assert 'namespace="b",pod="p2"} 37' in util[1]
    finally:
        sampler.stop()


@pytest.mark.parametrize(
    ("device_id", "uuid"),
    [(GPU0, GPU0), (f"{GPU0}::3", GPU0), ("MIG-1234", "MIG-1234"), ("0", None)],
)
def test_gpu_uuid(device_id: str, uuid: str | None) -> None:
    assert gpu_uuid(device_id) == uuid


def test_kubelet_error_status_is_a_mapping_error(kubelet: FakeKubelet) -> None:
    kubelet.status = grpc.StatusCode.PERMISSION_DENIED
    mapper = KubeletPodResources(kubelet.socket_path)
    try:
        with pytest.raises(PodMappingError, match="PERMISSION_DENIED"):
            mapper.holders()
    finally:
        mapper.close()


def test_missing_socket_is_a_mapping_error(socket_dir) -> None:
    mapper = KubeletPodResources(str(socket_dir / "absent.sock"), timeout=0.5)
    try:
        with pytest.raises(PodMappingError, match="UNAVAILABLE"):
            mapper.holders()
    finally:
        mapper.close()


def test_sampler_labels_held_gpus_and_survives_the_kubelet_going_away(
    kubelet: FakeKubelet,
) -> None:
    reader = FakeReader([FakeGpu(uuid=GPU0), FakeGpu(uuid=GPU1, pci_bus_id="00000000:0F:00.0")])
    kubelet.pods = [
        pod_resources("vision-lab", "train-0", {"trainer": [("nvidia.com/gpu", [GPU1])]})
    ]
    sampler = Sampler(reader, KubeletPodResources(kubelet.socket_path, timeout=0.5), "node1")
    try:
        snapshot = sampler.sample_once()
        assert [g.holder for g in snapshot.gpus] == [
            None,
            Holder("vision-lab", "train-0", "trainer"),
        ]
        text = render(DcgmCollector(sampler).collect())
        assert (
            'device="nvidia1"' in text
            and 'container="trainer",namespace="vision-lab",pod="train-0"} ' in text
        )
        assert 'gpuagent_pod_mapping_up{Hostname="node1"} 1' in text

        kubelet.stop()
        snapshot = sampler.sample_once()
        assert snapshot.pod_mapping_error and "UNAVAILABLE" in snapshot.pod_mapping_error
        assert len(snapshot.gpus) == 2 and all(g.holder is None for g in snapshot.gpus)
        text = render(DcgmCollector(sampler).collect())
        assert 'gpuagent_pod_mapping_up{Hostname="node1"} 0' in text
        assert 'gpuagent_errors_total{Hostname="node1",source="pod_mapping"} 1' in text
    finally:
        sampler.stop()


def test_a_restarted_kubelet_is_reached_on_its_new_socket(socket_dir) -> None:
    path = str(socket_dir / "kubelet.sock")
    first = FakeKubelet(path)
    first.start()
    first.pods = [pod_resources("a", "p", {"c": [("nvidia.com/gpu", [GPU0])]})]
    mapper = KubeletPodResources(path, timeout=0.5)
    try:
        assert mapper.holders() == {GPU0: (Holder("a", "p", "c"),)}
        first.stop()
        with pytest.raises(PodMappingError):
            mapper.holders()
        second = FakeKubelet(path)  # the kubelet restarted: a new socket at the same path
        second.pods = [pod_resources("b", "q", {"c": [("nvidia.com/gpu", [GPU1])]})]
        second.start()
        try:
            assert mapper.holders() == {GPU1: (Holder("b", "q", "c"),)}
        finally:
            second.stop()
    finally:
        mapper.close()
