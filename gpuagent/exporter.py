"""`/metrics` in dcgm-exporter's format, and `/healthz`, from the sampler's latest snapshot.

The metric names, HELP texts, types, label names and label order are dcgm-exporter's (and
kubesim's), so the portal's scraper reads NVIDIA's exporter, kubesim and this agent the same way:

    DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-…",pci_bus_id="00000000:07:00.0",device="nvidia0",
      modelName="NVIDIA A100-SXM4-80GB",Hostname="node1",DCGM_FI_DRIVER_VERSION="535.154.05",
      container="c",namespace="ns",pod="p"} 44

Units are dcgm-exporter's: memory in MiB, power in W, energy in mJ, temperature in °C. A lost GPU
has no DCGM series (as with dcgm-exporter, whose GPU falls off the bus); the agent's own
`gpuagent_gpu_lost` names it, with the other `gpuagent_*` metrics about the agent itself.

The families are prometheus_client `Metric`s from a custom collector. They are written by
`render` rather than `prometheus_client.generate_latest`, which appends `_total` to every
counter name (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total`): dcgm-exporter does not.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gpuagent.nvml import GpuInfo, GpuReading, MigDevice
from gpuagent.podresources import Holder
from gpuagent.sampler import GpuSample, Sampler, Snapshot

log = logging.getLogger("gpuagent")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1024 * 1024

# name, type, HELP (dcgm-exporter's default-counters.csv wording)
DCGM_METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
)


def _mib(value: int | None) -> float | None:
    return None if value is None else float(value // MIB)


def _watts(milliwatts: float | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def dcgm_values(reading: GpuReading, last_xid: int) -> dict[str, float | None]:
    """A reading in dcgm-exporter's units, by metric name; None: not exported for this GPU."""

    def num(value: float | None) -> float | None:
        return None if value is None else float(value)

    return {
        "DCGM_FI_DEV_GPU_TEMP": num(reading.temperature_c),
        "DCGM_FI_DEV_POWER_USAGE": _watts(reading.power_mw),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": num(reading.energy_mj),
        "DCGM_FI_DEV_GPU_UTIL": num(reading.gpu_util_pct),
        "DCGM_FI_DEV_MEM_COPY_UTIL": num(reading.mem_util_pct),
        "DCGM_FI_DEV_XID_ERRORS": float(last_xid),
        "DCGM_FI_DEV_FB_FREE": _mib(reading.mem_free_bytes),
        "DCGM_FI_DEV_FB_USED": _mib(reading.mem_used_bytes),
        "DCGM_FI_DEV_FB_RESERVED": _mib(reading.mem_reserved_bytes),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": num(reading.ecc_dbe_volatile),
    }


def device_labels(
    info: GpuInfo, hostname: str, driver_version: str, mig: MigDevice | None = None
) -> dict[str, str]:
    """dcgm-exporter's labels of a GPU (or of one of its MIG instances), in its order."""
    labels = {
        "gpu": str(info.index),
        "UUID": info.uuid,
        "pci_bus_id": info.pci_bus_id,
        "device": f"nvidia{info.index}",
        "modelName": info.name,
    }
    if mig is not None:
        labels |= {"GPU_I_PROFILE": mig.profile, "GPU_I_ID": str(mig.gpu_instance_id)}
    return labels | {"Hostname": hostname, "DCGM_FI_DRIVER_VERSION": driver_version}


def holder_labels(holder: Holder) -> dict[str, str]:
    return {"container": holder.container, "namespace": holder.namespace, "pod": holder.pod}


def gpu_label_sets(gpu: GpuSample, snapshot: Snapshot) -> list[dict[str, str]]:
    """The label sets of a GPU's series: one per holder (a time-sliced GPU's device figures
    once with each pod on it, as dcgm-exporter's --kubernetes-virtual-gpus copies them, less
    its per-replica `vgpu` label), or one without pod labels for a free GPU."""
    labels = device_labels(gpu.info, snapshot.hostname, snapshot.driver_version)
    if not gpu.holders:
        return [labels]
    return [labels | holder_labels(holder) for holder in gpu.holders]


class DcgmCollector(Collector):
    """prometheus_client collector over the sampler's latest snapshot. Never calls NVML."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        snapshot = self.sampler.snapshot
        yield from dcgm_families(snapshot)
        yield from pod_families(snapshot)
        yield from agent_families(snapshot, self.sampler)


def mig_rows(gpu: GpuSample, snapshot: Snapshot) -> list[tuple[dict[str, str], dict[str, float]]]:
    """A MIG instance's series, labelled as dcgm-exporter labels them (GPU_I_PROFILE, GPU_I_ID
    after modelName) and with its holder: the memory NVML reports per instance. Utilisation is
    not among them: NVML has none per instance (dcgm-exporter's comes from DCGM's profiling
    fields, which NVML does not offer)."""
    rows = []
    for instance in gpu.mig:
        mig = instance.device
        labels = device_labels(gpu.info, snapshot.hostname, snapshot.driver_version, mig)
        values = {
            "DCGM_FI_DEV_FB_USED": _mib(mig.mem_used_bytes),
            "DCGM_FI_DEV_FB_FREE": _mib(mig.mem_free_bytes),
        }
        present = {name: value for name, value in values.items() if value is not None}
        for holder_set in [holder_labels(h) for h in instance.holders] or [{}]:
            rows.append((labels | holder_set, present))
    return rows


def dcgm_families(snapshot: Snapshot) -> Iterator[Metric]:
    rows: list[tuple[dict[str, str], dict[str, float | None]]] = [
        (labels, dcgm_values(gpu.reading, gpu.last_xid))
        for gpu in snapshot.gpus
        for labels in gpu_label_sets(gpu, snapshot)
    ]
    for gpu in snapshot.gpus:
        rows.extend((labels, dict(values)) for labels, values in mig_rows(gpu, snapshot))
    for name, kind, documentation in DCGM_METRICS:
        family = Metric(name, documentation, kind)  # not CounterMetricFamily: no _total
        for labels, values in rows:
            value = values.get(name)
            if value is not None:
                family.add_sample(name, labels, value)
        yield family


# The agent's own per-pod families for a time-sliced GPU: dcgm-exporter has no per-process
# fields, so these are not its names. `scope` says whose figures they are.
POD_METRICS: tuple[tuple[str, str], ...] = (
    ("gpuagent_pod_gpu_util",
     "GPU utilization of a pod on a shared GPU (in %): its own processes' with "
     'scope="process", the whole GPU\'s (every pod on it) with scope="device".'),
    ("gpuagent_pod_mem_copy_util",
     "Memory utilization of a pod on a shared GPU (in %), scoped as gpuagent_pod_gpu_util."),
    ("gpuagent_pod_fb_used",
     "Framebuffer memory used by a pod on a shared GPU (in MiB), scoped as "
     "gpuagent_pod_gpu_util."),
)


def pod_families(snapshot: Snapshot) -> Iterator[Metric]:
    rows = []
    for gpu in snapshot.gpus:
        labels = device_labels(gpu.info, snapshot.hostname, snapshot.driver_version)
        for usage in gpu.pods:
            rows.append((
                labels | holder_labels(usage.holder) | {"scope": usage.scope},
                (usage.gpu_util_pct, usage.mem_util_pct, _mib(usage.fb_used_bytes)),
            ))
    for position, (name, documentation) in enumerate(POD_METRICS):
        family = Metric(name, documentation, "gauge")
        for row_labels, values in rows:
            value = values[position]
            if value is not None:
                family.add_sample(name, row_labels, float(value))
        yield family


def agent_families(snapshot: Snapshot, sampler: Sampler) -> Iterator[Metric]:
    host = {"Hostname": snapshot.hostname}
    up = GaugeMetricFamily(
        "gpuagent_nvml_up", "1 when NVML answered in the last cycle.", labels=list(host)
    )
    up.add_metric(list(host.values()), 1.0 if snapshot.nvml_up else 0.0)
    yield up

    mapping = GaugeMetricFamily(
        "gpuagent_pod_mapping_up",
        "1 when the kubelet pod-resources API answered in the last cycle.",
        labels=list(host),
    )
    mapping.add_metric(list(host.values()), 0.0 if snapshot.pod_mapping_error else 1.0)
    yield mapping

    lost = Metric(
        "gpuagent_gpu_lost", "1 for a GPU NVML reports lost (fallen off the bus).", "gauge"
    )
    for gpu in snapshot.lost:
        if gpu.info is not None:
            labels = device_labels(gpu.info, snapshot.hostname, snapshot.driver_version)
        else:
            labels = {"gpu": str(gpu.index), "device": f"nvidia{gpu.index}", **host}
        lost.add_sample("gpuagent_gpu_lost", labels, 1.0)
    yield lost

    taken = GaugeMetricFamily(
        "gpuagent_last_sample_timestamp_seconds",
        "When the agent last sampled the GPUs (Unix time).",
        labels=list(host),
    )
    taken.add_metric(list(host.values()), snapshot.taken_at)
    yield taken

    counters = sampler.counters
    errors = Metric("gpuagent_errors_total", "Failures while sampling, by source.", "counter")
    for source, count in (
        ("nvml", counters.nvml_errors),
        ("pod_mapping", counters.pod_mapping_errors),
        ("field", counters.field_errors),
    ):
        errors.add_sample("gpuagent_errors_total", {**host, "source": source}, float(count))
    yield errors

    xids = Metric("gpuagent_xid_events_total", "XID errors NVML reported.", "counter")
    xids.add_sample("gpuagent_xid_events_total", host, float(counters.xid_events))
    yield xids

    cycles = Metric("gpuagent_sample_cycles_total", "Sampling cycles completed.", "counter")
    cycles.add_sample("gpuagent_sample_cycles_total", host, float(counters.cycles))
    yield cycles


# -- the text format --------------------------------------------------------------------------


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integers without a trailing .0, as dcgm-exporter prints them."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    if math.isfinite(value):
        return repr(round(value, 3))
    text: str = floatToGoString(value)  # NaN, +Inf, -Inf as Prometheus writes them
    return text


def render(families: Iterable[Metric]) -> str:
    """Prometheus text format 0.0.4, names exactly as given, labels in the order given."""
    out: list[str] = []
    for family in families:
        out.append(f"# HELP {family.name} {_escape_help(family.documentation)}")
        out.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
            series = f"{sample.name}{{{labels}}}" if labels else sample.name
            out.append(f"{series} {format_value(sample.value)}")
    return "\n".join(out) + "\n"


def health(sampler: Sampler) -> tuple[int, dict[str, object]]:
    """/healthz: 503 only when sampling is stuck; NVML or kubelet trouble is reported, with 200,
    since restarting the agent would not fix them."""
    snapshot = sampler.snapshot
    healthy = sampler.healthy()
    problems = snapshot.nvml_error or snapshot.lost or snapshot.pod_mapping_error
    body: dict[str, object] = {
        "status": "ok" if healthy and not problems else "degraded",
        "sampling": "ok" if healthy else "stuck",
        "last_sample_age_seconds": round(max(0.0, time.time() - snapshot.taken_at), 3),
        "nvml": "ok" if snapshot.nvml_up else snapshot.nvml_error,
        "driver_version": snapshot.driver_version,
        "gpus": len(snapshot.gpus),
        "lost": [
            {"gpu": gpu.index, "UUID": gpu.info.uuid if gpu.info else None} for gpu in snapshot.lost
        ],
        "gpu_errors": list(snapshot.gpu_errors),
        "pod_mapping": snapshot.pod_mapping_error or "ok",
    }
    return (200 if healthy else 503), body


# -- HTTP -------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: AgentHTTPServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = render(self.server.collector.collect()).encode()
            self._send(200, CONTENT_TYPE, body)
        elif path == "/healthz":
            status, payload = health(self.server.collector.sampler)
            self._send(status, "application/json", json.dumps(payload).encode())
        elif path == "/":
            self._send(200, "text/plain; charset=utf-8", b"gpuagent: /metrics /healthz\n")
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature
        log.debug("%s " + format, self.address_string(), *args)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], collector: DcgmCollector) -> None:
        self.collector = collector
        super().__init__(address, _Handler)


class Exporter:
    """The sampler's thread plus the HTTP server's thread."""

    def __init__(self, sampler: Sampler, *, host: str = "0.0.0.0", port: int = 9400) -> None:
        self.sampler = sampler
        self.collector = DcgmCollector(sampler)
        self.httpd = AgentHTTPServer((host, port), self.collector)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self.sampler.start()
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="gpuagent-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sampler.stop()
