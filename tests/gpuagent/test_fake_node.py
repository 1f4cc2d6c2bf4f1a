"""A simulated GPU node for the agent: the fake NVML's workloads and node file (`--fake-node`),
and the node's pod-resources socket (stack/k8s/podresources.py) fed by a real API server.

The last tests run the whole path against a fresh kubesim with the demo inventory: pods bound to
gpu-a100-1 get device ids from the socket, and those are the GPU UUIDs kubesim's own kubelet gave
the same pods; the agent's /metrics then labels those GPUs with the pods and shows each pod's
workload (an idle notebook below 2 %, a busy trainer far above)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from gpuagent.__main__ import build, parse_args
from gpuagent.nvml import WORKLOADS, FakeGpu, FakeReader
from gpuagent.podresources import Holder, KubeletPodResources, StaticPodMapping
from gpuagent.processes import StaticProcessMapping
from gpuagent.sampler import Sampler
from kubesim.inventory import load_inventory, node_devices, parse_inventory
from stack.k8s.podresources import PodResourcesServer, pod_workload
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.waiting import eventually

NODE = "gpu-a100-1"


def reads(gpu: FakeGpu, count: int) -> list[float]:
    reader = FakeReader([gpu])
    reader.open()
    return [reader.read(0).gpu_util_pct or 0.0 for _ in range(count)]


# --- workloads -------------------------------------------------------------------------------


def test_an_idle_workload_stays_below_the_culling_threshold_and_busy_far_above() -> None:
    idle, busy, free = FakeGpu(uuid="GPU-i"), FakeGpu(uuid="GPU-b"), FakeGpu(uuid="GPU-f")
    idle.run("idle")
    busy.run("busy")
    free.run(None)
    assert max(reads(idle, 20)) < 2.0
    assert sum(reads(busy, 16)) / 16 > 80
    assert reads(free, 5) == [0.0] * 5


def test_memory_and_power_follow_the_workload() -> None:
    gpu = FakeGpu(uuid="GPU-x", idle_power_mw=62_000, max_power_mw=400_000)
    reader = FakeReader([gpu])
    reader.open()
    gpu.run(None)
    free = reader.read(0)
    gpu.run("busy")
    busy = reader.read(0)
    assert free.mem_used_bytes == 0 and free.power_mw == 62_000
    assert busy.mem_used_bytes is not None and busy.mem_used_bytes > gpu.memory_total_bytes // 2
    assert busy.power_mw is not None and 62_000 < busy.power_mw <= 400_000
    assert busy.mem_used_bytes + (busy.mem_free_bytes or 0) + (
        busy.mem_reserved_bytes or 0) == gpu.memory_total_bytes
    assert busy.mem_reserved_bytes


def test_an_unknown_workload_runs_busy_as_in_kubesim() -> None:
    gpu = FakeGpu(uuid="GPU-x")
    gpu.run("no-such-trace")
    assert gpu.util_trace == WORKLOADS["busy"].util and gpu.workload == "no-such-trace"


def test_ramp_warms_up_once_then_repeats_its_plateau() -> None:
    gpu = FakeGpu(uuid="GPU-r")
    gpu.run("ramp")
    values = reads(gpu, 80)
    assert values[0] < 10 and values[:30] == sorted(values[:30])
    plateau = WORKLOADS["ramp"].util[30:]
    assert values[30:] == [plateau[i % len(plateau)] for i in range(50)]


def test_a_new_workload_starts_from_its_first_sample() -> None:
    gpu = FakeGpu(uuid="GPU-r")
    gpu.run("ramp")
    reads(gpu, 40)
    gpu.run("ramp")
    assert reads(gpu, 1) == [WORKLOADS["ramp"].util[0]]


# --- the node file -----------------------------------------------------------------------------


def node_file(path: Path, workloads: list[str | None]) -> Path:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({
        "node": NODE, "driverVersion": "550.54.15",
        "gpus": [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA A100-SXM4-80GB",
                  "pciBusId": f"00000000:{7 + i:02X}:00.0", "memoryMiB": 81920,
                  "idleWatts": 62.0, "maxWatts": 400.0, "workload": w}
                 for i, w in enumerate(workloads)]}))
    temporary.replace(path)  # as the node's simulator writes it
    return path


def test_the_node_file_gives_identity_once_and_workloads_as_they_change(tmp_path: Path) -> None:
    path = node_file(tmp_path / "node.json", [None, "idle"])
    reader = FakeReader.from_node_file(path)
    reader.open()
    assert reader.driver_version() == "550.54.15" and reader.device_count() == 2
    info = reader.device_info(1)
    assert (info.uuid, info.name, info.pci_bus_id) == \
        ("GPU-1", "NVIDIA A100-SXM4-80GB", "00000000:08:00.0")
    assert reader.read(0).gpu_util_pct == 0.0 and (reader.read(1).gpu_util_pct or 0) < 2
    assert reader.read(0).mem_total_bytes == 81920 * 1024**2

    node_file(path, ["busy", None])  # a trainer took GPU 0, the notebook ended
    assert (reader.read(0).gpu_util_pct or 0) > 80 and reader.read(1).gpu_util_pct == 0.0

    path.write_text("{ half a file")  # a broken file keeps what was last read
    assert (reader.read(0).gpu_util_pct or 0) > 80
    path.unlink()
    assert (reader.read(0).gpu_util_pct or 0) > 80


def test_a_node_file_that_is_none_is_refused(tmp_path: Path) -> None:
    (tmp_path / "node.json").write_text('{"gpus": [{"uuid": "GPU-0"}]}')
    with pytest.raises(ValueError, match="not a node file"):
        FakeReader.from_node_file(tmp_path / "node.json")
    with pytest.raises(SystemExit, match="--fake-node"):
        build(parse_args(["--fake-node", str(tmp_path / "missing.json"), "--port", "0"]))


def test_fake_and_fake_node_are_not_given_together(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--fake", "--fake-node", str(tmp_path / "node.json")])


# --- the node's pod-resources socket, without an API server -----------------------------------


def a100_node():
    return next(n for n in load_inventory(str(DEMO_INVENTORY)).nodes if n.name == NODE)


def pod(name: str, gpus_by_container: dict[str, int], *, uid: str | None = None,
        phase: str = "Running", annotations: dict[str, str] | None = None,
        env: list[dict] | None = None) -> dict:
    return {
        "metadata": {"name": name, "namespace": "lab", "uid": uid or f"uid-{name}",
                     "annotations": annotations or {}},
        "spec": {"nodeName": NODE, "containers": [
            {"name": c, "env": env or [],
             "resources": {"limits": {"nvidia.com/gpu": str(n)}} if n else {}}
            for c, n in gpus_by_container.items()]},
        "status": {"phase": phase},
    }


@pytest.fixture
def server(socket_dir: Path) -> PodResourcesServer:
    return PodResourcesServer(a100_node(), api=None, socket_path=socket_dir / "kubelet.sock",
                              node_file=socket_dir / "node.json")


def test_devices_go_lowest_free_first_and_come_back_when_the_pod_ends(
        server: PodResourcesServer) -> None:
    uuids = [d.uuid for d in node_devices(server.spec)]
    server.observe("ADDED", pod("trainer", {"main": 2, "sidecar": 0}))
    server.observe("ADDED", pod("notebook", {"nb": 1}, annotations={
        "kubesim.io/gpu-trace": "idle"}))
    server.observe("MODIFIED", pod("trainer", {"main": 2, "sidecar": 0}))  # kept, not given again
    answer = {p.name: {c.name: [(d.resource_name, list(d.device_ids)) for d in c.devices]
                       for c in p.containers} for p in server.list_response().pod_resources}
    assert answer == {"trainer": {"main": [("nvidia.com/gpu", uuids[:2])], "sidecar": []},
                      "notebook": {"nb": [("nvidia.com/gpu", [uuids[2]])]}}
    document = json.loads(server.node_file.read_text())
    assert [g["workload"] for g in document["gpus"][:4]] == ["busy", "busy", "idle", None]
    assert document["gpus"][2]["heldBy"] == "lab/notebook"

    server.observe("MODIFIED", pod("trainer", {"main": 2}, phase="Succeeded"))
    server.observe("ADDED", pod("next", {"main": 1}))  # takes the lowest free: GPU 0 again
    held = {p.name: list(p.containers[0].devices[0].device_ids)
            for p in server.list_response().pod_resources}
    assert held == {"notebook": [uuids[2]], "next": [uuids[0]]}
    server.observe("DELETED", pod("notebook", {"nb": 1}))
    document = json.loads(server.node_file.read_text())
    assert [g["workload"] for g in document["gpus"][:3]] == ["busy", None, None]


def test_mig_slices_get_mig_ids_and_the_whole_gpu_reads_their_workload(socket_dir: Path) -> None:
    (spec,) = parse_inventory({"nodePools": [{
        "name": "mig", "count": 1, "namePrefix": f"{NODE}-x", "gpu": {
            "model": "A100-SXM4-80GB", "count": 2,
            "mig": {"strategy": "mixed", "layout": {"3g.40gb": 2}}}}]}).nodes
    server = PodResourcesServer(spec, api=None, socket_path=socket_dir / "kubelet.sock",
                                node_file=socket_dir / "node.json")
    slices = node_devices(spec)
    notebook = pod("notebook", {}, annotations={"kubesim.io/gpu-trace": "idle"})
    notebook["spec"]["nodeName"] = spec.name
    notebook["spec"]["containers"] = [{"name": "nb", "resources": {
        "limits": {"nvidia.com/mig-3g.40gb": "3"}}}]
    server.observe("ADDED", notebook)
    (answer,) = server.list_response().pod_resources
    (devices,) = answer.containers[0].devices
    assert devices.resource_name == "nvidia.com/mig-3g.40gb"
    assert list(devices.device_ids) == [d.mig_uuid for d in slices[:3]]
    assert all(i.startswith("MIG-") for i in devices.device_ids)
    document = json.loads(server.node_file.read_text())
    assert [(g["uuid"], g["workload"]) for g in document["gpus"]] == \
        [(slices[0].uuid, "idle"), (slices[2].uuid, "idle")]


def test_the_workload_is_the_annotation_else_the_env_else_busy() -> None:
    assert pod_workload(pod("a", {"c": 1}, annotations={"kubesim.io/gpu-trace": "bursty"},
                            env=[{"name": "KUBESIM_GPU_TRACE", "value": "idle"}])) == "bursty"
    assert pod_workload(pod("b", {"c": 1}, env=[{"name": "KUBESIM_GPU_TRACE",
                                                 "value": "idle"}])) == "idle"
    assert pod_workload(pod("c", {"c": 1})) == "busy"


# --- the whole node against a real API server ----------------------------------------------------


@pytest.fixture(scope="module")
def fresh_kubesim(kubesim_factory):
    """A kubesim of its own: no pods from other tests on the node, so both allocators start
    from the same empty node."""
    return kubesim_factory(inventory=DEMO_INVENTORY)


@pytest.fixture
def node(fresh_kubesim, socket_dir: Path) -> Iterator[PodResourcesServer]:
    api = fresh_kubesim.api_client()
    server = PodResourcesServer(a100_node(), api=api, socket_path=socket_dir / "kubelet.sock",
                                node_file=socket_dir / "node.json").start()
    yield server
    server.stop()
    api.close()


def gpu_pod(core: client.CoreV1Api, name: str, gpus: int, trace: str) -> None:
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"kubesim.io/gpu-trace": trace}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "main", "image": "pytorch/pytorch:2.3.0",
                            "command": ["sleep", "infinity"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}})


def dcgm(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)
            if f.name.startswith("DCGM_")}


def test_the_agent_maps_the_uuids_kubesim_gave_and_shows_each_pods_workload(
        fresh_kubesim, node: PodResourcesServer) -> None:
    mapper = KubeletPodResources(str(node.socket_path))
    with fresh_kubesim.api_client() as api:
        core = client.CoreV1Api(api)
        gpu_pod(core, "trainer", 2, "busy")
        gpu_pod(core, "notebook", 1, "idle")
        try:
            eventually(lambda: len(mapper.holders()) == 3, interval=0.05,
                       message="the kubelet does not report 3 holders")
            held = mapper.holders()
            assert sorted(h.pod for (h,) in held.values()) == ["notebook", "trainer", "trainer"]
            assert {h for (h,) in held.values()} == {Holder("default", "trainer", "main"),
                                                     Holder("default", "notebook", "main")}
            # kubesim's kubelet gave the same pods the same GPUs
            eventually(lambda: {s.labels.get("pod") for s in
                                dcgm(fresh_kubesim.url + "/metrics")["DCGM_FI_DEV_GPU_UTIL"]
                                if s.labels["Hostname"] == NODE} >= {"trainer", "notebook"},
                       interval=0.05, message="kubesim does not show both pods' GPUs")
            kubesim_view = {s.labels["UUID"]: s.labels.get("pod") for s in
                            dcgm(fresh_kubesim.url + "/metrics")["DCGM_FI_DEV_GPU_UTIL"]
                            if s.labels["Hostname"] == NODE and s.labels.get("pod")}
            assert kubesim_view == {uuid: h.pod for uuid, (h,) in held.items()}

            exporter = build(parse_args([
                "--fake-node", str(node.node_file), "--hostname", NODE,
                "--pod-resources-socket", str(node.socket_path),
                "--host", "127.0.0.1", "--port", "0", "--interval", "0.1"]))
            exporter.start()
            try:
                def sampled() -> list:  # the exporter's samples, once they name both pods
                    util = dcgm(exporter.url + "/metrics")["DCGM_FI_DEV_GPU_UTIL"]
                    return util if {"trainer", "notebook"} <= {s.labels.get("pod")
                                                               for s in util} else []

                util = eventually(sampled, interval=0.05,
                                  message="the exporter has no samples of the pods")
                by_pod: dict[str | None, list[float]] = {}
                for sample in util:
                    by_pod.setdefault(sample.labels.get("pod"), []).append(sample.value)
                    assert sample.labels["Hostname"] == NODE
                assert len(by_pod["trainer"]) == 2 and min(by_pod["trainer"]) > 30
                assert len(by_pod["notebook"]) == 1 and by_pod["notebook"][0] < 2
                assert by_pod[None] == [0.0] * 5  # the five GPUs nobody holds

                core.delete_namespaced_pod("notebook", "default", grace_period_seconds=0)
                eventually(lambda: len(mapper.holders()) == 2, interval=0.05,
                           message="the kubelet does not report 2 holders")
                eventually(lambda: [s.value for s in dcgm(exporter.url + "/metrics")[
                    "DCGM_FI_DEV_GPU_UTIL"] if s.labels.get("pod") is None] == [0.0] * 6,
                    interval=0.05, message="the notebook's GPU is not shown free")
            finally:
                exporter.stop()
        finally:
            mapper.close()
            for name in ("trainer", "notebook"):
                try:
                    core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
                except client.ApiException:
                    pass


def test_a_time_sliced_gpu_lists_a_process_per_pod_and_the_agent_gives_each_its_own(
        socket_dir: Path) -> None:
    (spec,) = [n for n in load_inventory(str(DEMO_INVENTORY)).nodes
               if n.name == "gpu-t4-shared-1"]
    server = PodResourcesServer(spec, api=None, socket_path=socket_dir / "kubelet.sock",
                                node_file=socket_dir / "node.json")
    for name, trace in (("busy", "busy"), ("idle", "idle")):
        notebook = pod(name, {}, annotations={"kubesim.io/gpu-trace": trace})
        notebook["spec"]["nodeName"] = spec.name
        notebook["spec"]["containers"] = [{"name": "nb", "resources": {
            "limits": {"nvidia.com/gpu.shared": "1"}}}]
        server.observe("ADDED", notebook)
    document = json.loads(server.node_file.read_text())
    first = document["gpus"][0]
    assert [(p["pod"], p["workload"]) for p in first["processes"]] == [
        ("busy", "busy"), ("idle", "idle")]
    assert "processes" not in document["gpus"][1]  # nobody holds a replica of it

    # the agent over that node file and the same holders: each pod its own figures
    reader = FakeReader.from_node_file(server.node_file)
    holders = {}
    for answer in server.list_response().pod_resources:
        for container in answer.containers:
            for devices in container.devices:
                for device_id in devices.device_ids:
                    holders.setdefault(device_id.split("::")[0], []).append(
                        Holder(answer.namespace, answer.name, container.name, shared=True))
    sampler = Sampler(reader, StaticPodMapping(holders), spec.name,
                      processes=StaticProcessMapping(reader.process_pods))
    for _ in range(3):
        sampler.sample_once()
    (gpu,) = [g for g in sampler.snapshot.gpus if g.pods]
    own = {usage.holder.pod: (usage.scope, usage.gpu_util_pct) for usage in gpu.pods}
    assert own["busy"][0] == own["idle"][0] == "process"
    assert own["idle"][1] is not None and own["idle"][1] < 2
    assert own["busy"][1] is not None and own["busy"][1] > 30


def test_a_mig_nodes_file_lists_its_instances_and_the_agent_reads_their_memory(
        socket_dir: Path) -> None:
    (spec,) = parse_inventory({"nodePools": [{
        "name": "mig", "count": 1, "namePrefix": f"{NODE}-m", "gpu": {
            "model": "A100-SXM4-80GB", "count": 1,
            "mig": {"strategy": "mixed", "layout": {"1g.10gb": 7}}}}]}).nodes
    server = PodResourcesServer(spec, api=None, socket_path=socket_dir / "kubelet.sock",
                                node_file=socket_dir / "node.json")
    slices = node_devices(spec)
    notebook = pod("notebook", {}, env=[{"name": "KUBESIM_GPU_TRACE", "value": "busy"}])
    notebook["spec"]["nodeName"] = spec.name
    notebook["spec"]["containers"] = [{"name": "nb", "resources": {
        "limits": {"nvidia.com/mig-1g.10gb": "1"}}}]
    server.observe("ADDED", notebook)
    (gpu,) = json.loads(server.node_file.read_text())["gpus"]
    assert [(i["uuid"], i["gpuInstanceId"], i["profile"], i["workload"]) for i in gpu["mig"]] == \
        [(d.mig_uuid, d.mig_instance, "1g.10gb", "busy" if n == 0 else None)
         for n, d in enumerate(slices)]

    reader = FakeReader.from_node_file(server.node_file)
    reader.open()
    instances = reader.mig_devices(0)
    assert [i.uuid for i in instances] == [d.mig_uuid for d in slices]
    assert instances[0].mem_used_bytes and not any(i.mem_used_bytes for i in instances[1:])
    assert reader.gpus[0].unsupported == frozenset({"utilization"})  # NVML in MIG mode
    server.observe("DELETED", notebook)
    reader.read(0)  # follows the file: the slice given back uses nothing
    assert not any(i.mem_used_bytes for i in reader.mig_devices(0))
