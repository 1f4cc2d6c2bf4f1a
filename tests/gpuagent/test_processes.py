"""Usage per pod on a shared GPU (NvmlReader's per-process calls are in test_nvml.py): PIDs
to pods through the cgroup and the kubelet's pod log directory, the per-pod series of a
time-sliced GPU and the series of MIG instances."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpuagent.exporter import DcgmCollector, render
from gpuagent.nvml import (
    FakeGpu,
    FakeProcess,
    FakeReader,
    MigDevice,
)
from gpuagent.podresources import Holder, StaticPodMapping
from gpuagent.processes import (
    CgroupPods,
    NoProcessMapping,
    ProcessMappingError,
    StaticProcessMapping,
    pod_uid_from_cgroup,
)
from gpuagent.sampler import Sampler

MIB = 2**20
GPU = "GPU-7e570000-0000-4000-8000-000000000000"
A100 = "GPU-a1000000-0000-4000-8000-000000000000"
ALICE = Holder("vision-lab", "jupyter-alice", "notebook", shared=True)
BOB = Holder("nlp-lab", "jupyter-bob", "notebook", shared=True)
UID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"


def scrape(sampler: Sampler) -> dict[str, list[Sample]]:
    text = render(DcgmCollector(sampler).collect())
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def by_pod(samples: list[Sample]) -> dict[str, tuple[str, float]]:
    return {s.labels["pod"]: (s.labels["scope"], s.value) for s in samples}


# -- PID → pod -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cgroup",
    [
        # cgroup v2, systemd driver, containerd
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        f"{UID.replace('-', '_')}.slice/cri-containerd-0123abcd.scope\n",
        # cgroup v1, cgroupfs driver
        f"12:memory:/kubepods/burstable/pod{UID}/0123abcd\n11:cpu:/kubepods/burstable/pod{UID}/0\n",
    ],
)
def test_the_pod_uid_is_read_from_either_cgroup_layout(cgroup: str) -> None:
    assert pod_uid_from_cgroup(cgroup) == UID


def test_a_process_outside_pods_has_no_pod_uid() -> None:
    assert pod_uid_from_cgroup("0::/system.slice/nvidia-persistenced.service\n") is None


def test_cgroup_pods_names_the_pod_from_the_kubelets_log_directory(tmp_path: Path) -> None:
    proc, logs = tmp_path / "proc", tmp_path / "pods"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"0::/kubepods/besteffort/pod{UID}/abc\n")
    (proc / "1").mkdir()
    (proc / "1" / "cgroup").write_text("0::/init.scope\n")
    mapper = CgroupPods(str(proc), str(logs))
    with pytest.raises(ProcessMappingError):
        mapper.pod_of(4242)  # no log directory: nothing can be attributed
    (logs / f"vision-lab_jupyter-alice_{UID}" / "notebook").mkdir(parents=True)
    assert mapper.pod_of(4242) == ("vision-lab", "jupyter-alice")
    assert mapper.pod_of(1) is None
    assert mapper.pod_of(99999) is None  # ended


# -- per-pod series of a time-sliced GPU ------------------------------------------------------


def shared_node(**gpu: Any) -> tuple[FakeReader, StaticPodMapping, StaticProcessMapping]:
    reader = FakeReader([FakeGpu(
        uuid=GPU, name="Tesla T4",
        processes=[FakeProcess(100, (88.0,), 6 * 2**30), FakeProcess(200, (0.0,), 2**30)],
        **gpu,
    )])
    mapper = StaticPodMapping({GPU: (ALICE, BOB)})
    pods = StaticProcessMapping({100: ("vision-lab", "jupyter-alice"),
                                 200: ("nlp-lab", "jupyter-bob")})
    return reader, mapper, pods


def test_each_pod_on_a_time_sliced_gpu_gets_its_own_figures() -> None:
    reader, mapper, pods = shared_node()
    sampler = Sampler(reader, mapper, "gpu-t4-shared-1", processes=pods)
    sampler.sample_once()
    sampler.sample_once()  # per-process samples are of the period before
    metrics = scrape(sampler)
    assert by_pod(metrics["gpuagent_pod_gpu_util"]) == {
        "jupyter-alice": ("process", 88.0), "jupyter-bob": ("process", 0.0),
    }
    assert by_pod(metrics["gpuagent_pod_fb_used"]) == {
        "jupyter-alice": ("process", 6144.0), "jupyter-bob": ("process", 1024.0),
    }
    # the device's own series stay dcgm-exporter's: once per pod, the whole GPU's figure
    device = metrics["DCGM_FI_DEV_GPU_UTIL"]
    assert sorted((s.labels["pod"], s.value) for s in device) == [
        ("jupyter-alice", 88.0), ("jupyter-bob", 88.0),
    ]
    label_order = list(metrics["gpuagent_pod_gpu_util"][0].labels)
    assert label_order[-4:] == ["container", "namespace", "pod", "scope"]


@pytest.mark.parametrize("why", ["no per-process utilisation", "processes not attributed"])
def test_without_process_figures_the_pods_get_the_device_figures_marked_device(why: str) -> None:
    if why == "no per-process utilisation":
        reader, mapper, pods = shared_node(process_util_supported=False)
        sampler = Sampler(reader, mapper, "gpu-t4-shared-1", processes=pods)
    else:
        reader, mapper, _ = shared_node()
        sampler = Sampler(reader, mapper, "gpu-t4-shared-1", processes=NoProcessMapping())
    sampler.sample_once()
    sampler.sample_once()
    assert by_pod(scrape(sampler)["gpuagent_pod_gpu_util"]) == {
        "jupyter-alice": ("device", 88.0), "jupyter-bob": ("device", 88.0),
    }


def test_a_whole_gpu_has_no_per_pod_series() -> None:
    reader = FakeReader([FakeGpu(uuid=GPU, util_trace=(50.0,))])
    sampler = Sampler(reader, StaticPodMapping({GPU: Holder("a", "p", "c")}), "n")
    sampler.sample_once()
    assert scrape(sampler)["gpuagent_pod_gpu_util"] == []


# -- MIG --------------------------------------------------------------------------------------


def test_mig_instances_are_series_of_their_own_labelled_as_dcgm_exporter_does() -> None:
    reader = FakeReader([FakeGpu(
        uuid=A100, unsupported=frozenset({"utilization"}),
        mig=[MigDevice("MIG-1111", 7, "1g.10gb", 1_200 * MIB, 8_784 * MIB),
             MigDevice("MIG-2222", 8, "1g.10gb", 0, 9_984 * MIB)],
    )])
    mapper = StaticPodMapping({"MIG-1111": Holder("vision-lab", "jupyter-carol", "notebook")})
    sampler = Sampler(reader, mapper, "gpu-a100-mig-1")
    sampler.sample_once()
    used = scrape(sampler)["DCGM_FI_DEV_FB_USED"]
    instances = [s for s in used if "GPU_I_ID" in s.labels]
    assert [(s.labels["GPU_I_ID"], s.labels["GPU_I_PROFILE"], s.labels.get("pod"), s.value)
            for s in instances] == [("7", "1g.10gb", "jupyter-carol", 1200.0),
                                    ("8", "1g.10gb", None, 0.0)]
    assert list(instances[0].labels) == [
        "gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID",
        "Hostname", "DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod",
    ]
    assert instances[0].labels["UUID"] == A100  # the parent GPU's, as dcgm-exporter's


# -- the node file ----------------------------------------------------------------------------


def test_the_node_file_scripts_a_process_per_pod(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"node": "gpu-t4-shared-1", "gpus": [{
        "index": 0, "uuid": GPU, "name": "Tesla T4", "pciBusId": "00000000:07:00.0",
        "memoryMiB": 15360, "workload": "busy",
        "processes": [
            {"pid": 100, "namespace": "vision-lab", "pod": "jupyter-alice", "workload": "busy"},
            {"pid": 200, "namespace": "nlp-lab", "pod": "jupyter-bob", "workload": "idle",
             "memoryMiB": 700},
        ],
    }]}))
    reader = FakeReader.from_node_file(path)
    assert reader.process_pods() == {100: ("vision-lab", "jupyter-alice"),
                                     200: ("nlp-lab", "jupyter-bob")}
    sampler = Sampler(reader, StaticPodMapping({GPU: (ALICE, BOB)}), "gpu-t4-shared-1",
                      processes=StaticProcessMapping(reader.process_pods))
    for _ in range(3):
        sampler.sample_once()
    pods = by_pod(scrape(sampler)["gpuagent_pod_gpu_util"])
    assert pods["jupyter-alice"][0] == "process" and pods["jupyter-alice"][1] > 30
    assert pods["jupyter-bob"][0] == "process" and pods["jupyter-bob"][1] < 2
    assert by_pod(scrape(sampler)["gpuagent_pod_fb_used"])["jupyter-bob"] == ("process", 700.0)


def test_a_pod_joining_a_shared_gpu_leaves_the_others_figures_their_own(tmp_path: Path) -> None:
    """A second pod on the GPU starts the traces again; the first pod's next sample is still
    newer than those the sampler saw, so its figure stays its own busy one, never a 0 for
    want of new samples."""
    path = tmp_path / "node.json"
    alice = {"pid": 100, "namespace": "vision-lab", "pod": "jupyter-alice", "workload": "busy"}
    bob = {"pid": 200, "namespace": "nlp-lab", "pod": "jupyter-bob", "workload": "idle"}

    def node(*processes: dict[str, Any]) -> None:
        path.write_text(json.dumps({"node": "gpu-t4-shared-1", "gpus": [{
            "index": 0, "uuid": GPU, "name": "Tesla T4", "pciBusId": "00000000:07:00.0",
            "memoryMiB": 15360, "workload": "busy", "processes": list(processes)}]}))

    node(alice)
    reader = FakeReader.from_node_file(path)
    sampler = Sampler(reader, StaticPodMapping({GPU: (ALICE, BOB)}), "gpu-t4-shared-1",
                      processes=StaticProcessMapping(reader.process_pods))
    for _ in range(4):
        sampler.sample_once()
    assert by_pod(scrape(sampler)["gpuagent_pod_gpu_util"])["jupyter-alice"][1] > 30
    node(alice, bob)
    for cycle in range(3):
        sampler.sample_once()
        if cycle:  # the cycle that saw bob arrive read no samples of the new period yet
            pods = by_pod(scrape(sampler)["gpuagent_pod_gpu_util"])
            assert pods["jupyter-alice"][0] == "process" and pods["jupyter-alice"][1] > 30, cycle
            assert pods["jupyter-bob"][0] == "process" and pods["jupyter-bob"][1] < 2
