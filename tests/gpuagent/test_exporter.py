"""The agent over the fake NVML: /metrics parsed with Prometheus' parser, faults, /healthz."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpuagent.exporter import DCGM_METRICS, DcgmCollector, Exporter, health, render
from gpuagent.nvml import A100_80GB, FakeGpu, FakeReader, GpuReading
from gpuagent.podresources import Holder, NoPodMapping, StaticPodMapping
from gpuagent.sampler import Sampler

REPO = Path(__file__).resolve().parents[2]
DCGM = [name for name, _, _ in DCGM_METRICS]
GIB = 1024**3
UUIDS = [f"GPU-5a1e0000-0000-4000-8000-00000000000{n}" for n in range(3)]


def node(**overrides) -> FakeReader:
    gpus = [
        FakeGpu(
            uuid=UUIDS[0],
            util_trace=(90.0, 10.0),
            mem_util_trace=(40.0,),
            mem_used_trace=(30 * GIB,),
            temperature_trace=(65.0,),
            power_mw_trace=(312_500.0,),
        ),
        FakeGpu(uuid=UUIDS[1], pci_bus_id="00000000:0F:00.0"),
        FakeGpu(uuid=UUIDS[2], pci_bus_id="00000000:47:00.0"),
    ]
    return FakeReader(gpus, **overrides)


def sampler_for(reader: FakeReader, holders: dict[str, Holder] | None = None) -> Sampler:
    mapper = StaticPodMapping(holders) if holders is not None else NoPodMapping()
    return Sampler(reader, mapper, hostname="gpu-node-7", interval=0.05)


def scrape(sampler: Sampler) -> dict[str, list[Sample]]:
    text = render(DcgmCollector(sampler).collect())
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def one(samples: list[Sample], **labels: str) -> Sample:
    found = [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, found)
    return found[0]


def test_metrics_names_labels_and_units() -> None:
    sampler = sampler_for(node(), {UUIDS[0]: Holder("vision-lab", "train-0", "trainer")})
    sampler.sample_once()
    text = render(DcgmCollector(sampler).collect())
    for name, kind, _ in DCGM_METRICS:
        assert f"# TYPE {name} {kind}\n" in text
        assert f"# HELP {name} " in text
    assert "_total{" not in text.split("gpuagent_")[0]  # dcgm's counters keep their names

    metrics = scrape(sampler)
    for name in DCGM:
        assert len(metrics[name]) == 3, name
    held = one(metrics["DCGM_FI_DEV_GPU_UTIL"], gpu="0")
    assert list(held.labels) == [
        "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
        "DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod",
    ]  # fmt: skip
    assert held.labels == {
        "gpu": "0",
        "UUID": UUIDS[0],
        "pci_bus_id": "00000000:07:00.0",
        "device": "nvidia0",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": "gpu-node-7",
        "DCGM_FI_DRIVER_VERSION": "535.154.05",
        "container": "trainer",
        "namespace": "vision-lab",
        "pod": "train-0",
    }
    assert held.value == 90
    free = one(metrics["DCGM_FI_DEV_GPU_UTIL"], gpu="1")
    assert "pod" not in free.labels and free.labels["device"] == "nvidia1"

    assert one(metrics["DCGM_FI_DEV_FB_USED"], gpu="0").value == 30 * 1024  # MiB
    reserved = one(metrics["DCGM_FI_DEV_FB_RESERVED"], gpu="0").value  # the driver's, ≈ 0.6 %
    assert reserved == A100_80GB // 2**20 // 170
    assert one(metrics["DCGM_FI_DEV_FB_FREE"], gpu="0").value == (A100_80GB // 2**20 - 30 * 1024
                                                                   - reserved)
    assert one(metrics["DCGM_FI_DEV_POWER_USAGE"], gpu="0").value == 312.5  # W
    assert one(metrics["DCGM_FI_DEV_GPU_TEMP"], gpu="0").value == 65
    assert one(metrics["DCGM_FI_DEV_MEM_COPY_UTIL"], gpu="0").value == 40
    assert one(metrics["DCGM_FI_DEV_XID_ERRORS"], gpu="0").value == 0
    assert one(metrics["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"], gpu="0").value == 0
    energy = one(metrics["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], gpu="0").value
    assert energy == 312_500 * 5  # mW × s = mJ, one 5 s read

    sampler.sample_once()  # the next sample: the trace moves on, the counter grows
    metrics = scrape(sampler)
    assert one(metrics["DCGM_FI_DEV_GPU_UTIL"], gpu="0").value == 10
    assert one(metrics["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], gpu="0").value == 2 * energy
    assert one(metrics["gpuagent_nvml_up"]).value == 1
    assert one(metrics["gpuagent_sample_cycles"]).value == 2


def test_xid_is_the_last_xid_of_that_gpu_and_stays() -> None:
    reader = node()
    sampler = sampler_for(reader)
    sampler.sample_once()
    reader.inject_xid(2, 48)
    reader.inject_xid(2, 79)
    sampler.sample_once()
    metrics = scrape(sampler)
    assert one(metrics["DCGM_FI_DEV_XID_ERRORS"], gpu="2").value == 79
    assert one(metrics["DCGM_FI_DEV_XID_ERRORS"], gpu="0").value == 0
    assert one(metrics["gpuagent_xid_events"]).value == 2
    sampler.sample_once()
    assert one(scrape(sampler)["DCGM_FI_DEV_XID_ERRORS"], gpu="2").value == 79


def test_ecc_double_bit_errors() -> None:
    reader = node()
    reader.gpus[1].ecc_dbe = 2
    sampler = sampler_for(reader)
    sampler.sample_once()
    assert one(scrape(sampler)["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"], gpu="1").value == 2


def test_lost_gpu_disappears_from_dcgm_series_and_is_named_lost() -> None:
    reader = node()
    sampler = sampler_for(reader)
    sampler.sample_once()
    reader.lose(1)
    snapshot = sampler.sample_once()
    assert [g.index for g in snapshot.lost] == [1]
    metrics = scrape(sampler)
    for name in DCGM:  # as with dcgm-exporter and kubesim: a lost GPU reports nothing
        assert {s.labels["gpu"] for s in metrics[name]} == {"0", "2"}, name
    lost = one(metrics["gpuagent_gpu_lost"])
    assert lost.value == 1 and lost.labels["UUID"] == UUIDS[1] and lost.labels["gpu"] == "1"
    status, body = health(sampler)
    assert status == 200 and body["status"] == "degraded"
    assert body["lost"] == [{"gpu": 1, "UUID": UUIDS[1]}]

    reader.recover(1)
    sampler.sample_once()
    metrics = scrape(sampler)
    assert metrics["gpuagent_gpu_lost"] == []
    assert len(metrics["DCGM_FI_DEV_GPU_UTIL"]) == 3


def test_gpu_lost_before_it_was_identified() -> None:
    reader = node()
    reader.lose(0)
    sampler = sampler_for(reader)
    sampler.sample_once()
    lost = one(scrape(sampler)["gpuagent_gpu_lost"])
    assert lost.labels == {"gpu": "0", "device": "nvidia0", "Hostname": "gpu-node-7"}


def test_nvml_missing_keeps_serving_and_recovers_when_the_driver_appears() -> None:
    reader = node(available=False)
    sampler = sampler_for(reader)
    snapshot = sampler.sample_once()
    assert snapshot.nvml_error == "nvmlInit: NVML Shared Library Not Found"
    metrics = scrape(sampler)
    assert all(metrics[name] == [] for name in DCGM)  # families with HELP/TYPE, no series
    assert one(metrics["gpuagent_nvml_up"]).value == 0
    assert one(metrics["gpuagent_errors"], source="nvml").value == 1
    status, body = health(sampler)
    assert status == 200  # a restart would not bring a driver: alive, and saying why
    assert body["nvml"] == "nvmlInit: NVML Shared Library Not Found"

    reader.available = True  # the driver was installed: nvmlInit is retried every cycle
    sampler.sample_once()
    assert reader.open_calls == 2
    assert len(scrape(sampler)["DCGM_FI_DEV_GPU_UTIL"]) == 3
    assert one(scrape(sampler)["gpuagent_nvml_up"]).value == 1


def test_unsupported_field_is_left_out_for_that_gpu_only() -> None:
    reader = node()
    reader.gpus[2].unsupported = frozenset({"energy", "ecc_dbe"})
    sampler = sampler_for(reader)
    sampler.sample_once()
    metrics = scrape(sampler)
    assert {s.labels["gpu"] for s in metrics["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]} == {"0", "1"}
    assert {s.labels["gpu"] for s in metrics["DCGM_FI_DEV_GPU_UTIL"]} == {"0", "1", "2"}


class BlockingReader(FakeReader):
    """A driver call that hangs (as NVML does while a GPU resets)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.block = threading.Event()
        self.release = threading.Event()

    def read(self, index: int) -> GpuReading:
        if self.block.is_set():
            self.release.wait(10)
        return super().read(index)


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_http_scrape_never_waits_for_nvml_and_healthz_sees_a_stuck_sampler() -> None:
    reader = BlockingReader(node().gpus)
    sampler = Sampler(reader, NoPodMapping(), hostname="gpu-node-7", interval=0.05)
    exporter = Exporter(sampler, host="127.0.0.1", port=0)
    exporter.start()
    try:
        status, content_type, text = get(exporter.url + "/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        assert len(one_family(text, "DCGM_FI_DEV_GPU_UTIL")) == 3
        status, _, body = get(exporter.url + "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"

        reader.block.set()  # NVML hangs from now on
        time.sleep(0.2)
        started = time.monotonic()
        status, _, text = get(exporter.url + "/metrics")
        assert time.monotonic() - started < 1.0
        assert status == 200 and len(one_family(text, "DCGM_FI_DEV_GPU_UTIL")) == 3  # last sample

        sampler.last_cycle_monotonic = time.monotonic() - 60  # as if hung for a minute
        status, _, body = get(exporter.url + "/healthz")
        assert status == 503 and json.loads(body)["sampling"] == "stuck"
        assert get(exporter.url + "/nope")[0] == 404
    finally:
        reader.release.set()
        exporter.stop()


def one_family(text: str, name: str) -> list[Sample]:
    return next(f for f in text_string_to_metric_families(text) if f.name == name).samples


def test_python_m_gpuagent_fake_serves_metrics() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuagent",
            "--fake",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--interval",
            "0.2",
            "--hostname",
            "demo-node",
        ],  # fmt: skip
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("gpuagent listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[-1]
        status, _, text = get(url + "/metrics")
        assert status == 200
        util = one_family(text, "DCGM_FI_DEV_GPU_UTIL")
        assert len(util) == 4 and {s.labels["Hostname"] for s in util} == {"demo-node"}
        assert {s.labels.get("pod") for s in util} == {"train-resnet-0", "jupyter-alice", None}
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


@pytest.mark.parametrize("value", ['a"b', "back\\slash", "new\nline"])
def test_label_values_are_escaped(value: str) -> None:
    reader = node()
    sampler = sampler_for(reader, {UUIDS[0]: Holder("ns", value, "c")})
    sampler.sample_once()
    assert one(scrape(sampler)["DCGM_FI_DEV_GPU_UTIL"], gpu="0").labels["pod"] == value
