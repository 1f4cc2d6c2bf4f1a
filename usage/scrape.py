"""Reading GPU telemetry: which exporters to scrape, fetching them, parsing what they say.

No database here: services.usage_scrape stores what this module returns.

Discovery, in this order (the first that applies wins):

1. `PORTAL_PROMETHEUS_URL` set: one PromQL instant query to that Prometheus for the DCGM
   metrics (whatever scrapes dcgm-exporter or the NVML agent there).
2. `PORTAL_GPU_EXPORTER_URLS` set: those exporters' /metrics, as given (exporters at fixed
   addresses, such as the real control plane's agents on loopback, which no Endpoints can hold).
3. The endpoints of the exporter Service `PORTAL_GPU_EXPORTER_SERVICE` (`namespace/name`,
   default `gpu-portal/gpuagent`; the port named `metrics`, else `PORTAL_GPU_EXPORTER_PORT`,
   9400): every ready address is scraped at `http://<ip>:<port>/metrics`. When the Endpoints
   object exists but has no ready address, there is nothing to scrape (the exporter is down).
4. The cluster API server's own `/metrics`, when it answers DCGM metric names: kubesim does,
   a real API server does not (that answer is remembered for ten minutes, so a real cluster's
   large /metrics is not fetched every cycle).

Every fetch has a total deadline (`PORTAL_USAGE_SCRAPE_TIMEOUT`) and a size limit; targets are
fetched concurrently, so a slow or failing one never holds up the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

import aiohttp
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from kube.client import Kube, KubeError, NotFound

log = logging.getLogger(__name__)

MAX_BYTES = 32 * 1024 * 1024  # a 1,000-GPU node set renders in a few MiB
KUBESIM_RECHECK_SECONDS = 600.0

# DCGM field → DeviceReading attribute
METRICS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_FB_FREE": "memory_free_mib",
    "DCGM_FI_DEV_FB_RESERVED": "memory_reserved_mib",  # the driver's own: neither used nor free
    "DCGM_FI_DEV_GPU_TEMP": "temperature",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
}
# The agent's per-pod families for a time-sliced GPU (gpuagent/README.md, "Usage per pod on a
# shared GPU"): label `scope` says whether the figure is the pod's own ("process") or the whole
# GPU's, shared with the other pods on it ("device").
POD_METRICS = {
    "gpuagent_pod_gpu_util": "pod_util",
    "gpuagent_pod_fb_used": "pod_memory_used_mib",
}
SCOPES = ("process", "device")
PROMQL = '{__name__=~"' + "|".join([*METRICS, *POD_METRICS]) + '"}'


class ScrapeFailed(Exception):
    """A target did not answer usable telemetry (connection, status, timeout, size, garbage)."""


@dataclasses.dataclass(frozen=True)
class Target:
    url: str
    source: str  # ScrapeTarget.Source values: prometheus | exporter | kubesim


@dataclasses.dataclass
class DeviceReading:
    """One GPU (or MIG instance) as one exporter reported it in one scrape."""

    node: str
    index: int
    uuid: str
    mig_instance: str = ""
    mig_profile: str = ""
    model: str = ""
    namespace: str = ""
    pod: str = ""
    util: float | None = None
    memory_used_mib: float | None = None
    memory_free_mib: float | None = None
    memory_reserved_mib: float | None = None
    temperature: float | None = None
    power_w: float | None = None
    xid: float | None = None
    ecc_dbe: float | None = None
    # "" the device is this pod's alone (a whole GPU, a MIG instance) or free; on a shared
    # (time-sliced) GPU, "process": pod_util is the pod's own; "device": util is the whole
    # GPU's, shared with the other pods on it, and nothing says what is this pod's
    scope: str = ""
    pod_util: float | None = None
    pod_memory_used_mib: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """One reading per device and pod: a time-sliced GPU has one per pod on it."""
        return self.uuid, self.mig_instance, self.namespace, self.pod

    @property
    def device_key(self) -> tuple[str, str]:
        return self.uuid, self.mig_instance

    @property
    def own_util(self) -> float | None:
        """The pod's own utilisation where known, else the device's (see `scope`); None for a
        MIG instance with memory only (the NVML agent's)."""
        if self.scope == "process" and self.pod_util is not None:
            return float(self.pod_util)
        return None if self.util is None else float(self.util)

    @property
    def own_memory_used_mib(self) -> float | None:
        if self.scope == "process" and self.pod_memory_used_mib is not None:
            return self.pod_memory_used_mib
        return self.memory_used_mib

    @property
    def memory_total_mib(self) -> int:
        """The board's memory, as nvidia-smi's total: used + free + the driver's reserved."""
        return int((self.memory_used_mib or 0) + (self.memory_free_mib or 0)
                   + (self.memory_reserved_mib or 0))


@dataclasses.dataclass
class TargetResult:
    target: Target
    readings: list[DeviceReading] = dataclasses.field(default_factory=list)
    garbage: int = 0  # series not understood (no UUID, bad value …)
    error: str = ""
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        return not self.error


# --- parsing ---------------------------------------------------------------------------------

def _label(labels: dict[str, str], *names: str) -> str:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return ""


def readings_from_series(series: Iterable[tuple[str, dict[str, str], float]]
                         ) -> tuple[list[DeviceReading], int]:
    """(metric name, labels, value) triples → one reading per device, and the garbage count.

    Labels as dcgm-exporter writes them (`Hostname`, or `hostname` in its newest builds);
    behind Prometheus the exporter's own `namespace`/`pod` may have been renamed
    `exported_namespace`/`exported_pod` (the scrape's target labels won), so those come first.
    A series without UUID or GPU index, or with a value that is no finite non-negative number,
    is garbage; a device without utilisation is garbage too (nothing to account), except in MIG
    mode under the NVML agent, which has none there: an instance with its memory is a reading
    with `util` None (stored, memory only), the GPU holding the instances is skipped (its
    instances are what pods hold).
    """
    devices: dict[tuple[str, str, str, str], DeviceReading] = {}
    garbage = 0
    for name, labels, value in series:
        field = METRICS.get(name) or POD_METRICS.get(name)
        if field is None:
            continue
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        try:
            index = int(labels.get("gpu", ""))
            value = float(value)
        except (TypeError, ValueError):
            garbage += 1
            continue
        if not uuid or index < 0 or not math.isfinite(value) or value < 0:
            garbage += 1
            continue
        mig_instance = labels.get("GPU_I_ID", "")
        namespace = _label(labels, "exported_namespace", "namespace")[:63]
        pod = _label(labels, "exported_pod", "pod")[:253]
        key = (uuid[:96], mig_instance[:16], namespace, pod)
        reading = devices.get(key)
        if reading is None:
            reading = devices[key] = DeviceReading(
                node=_label(labels, "Hostname", "hostname", "node", "kubernetes_node",
                            "instance")[:253],
                index=index, uuid=uuid[:96], mig_instance=mig_instance[:16],
                mig_profile=labels.get("GPU_I_PROFILE", "")[:32],
                model=labels.get("modelName", "")[:128],
                namespace=namespace, pod=pod,
            )
        if name in POD_METRICS:
            scope = labels.get("scope", "")
            if scope not in SCOPES:
                garbage += 1
                continue
            reading.scope = scope
        setattr(reading, field, value)
    # Several pods on one device's series and no per-pod figures (dcgm-exporter labels a
    # time-sliced GPU with each pod on it): the figures are the device's, not each pod's.
    pods_on: dict[tuple[str, str], int] = {}
    for reading in devices.values():
        if reading.pod:
            pods_on[reading.device_key] = pods_on.get(reading.device_key, 0) + 1
    for reading in devices.values():
        if reading.pod and not reading.scope and pods_on[reading.device_key] > 1:
            reading.scope = "device"
    readings = []
    in_mig_mode = {reading.uuid for reading in devices.values() if reading.mig_instance}
    for reading in devices.values():
        if reading.util is None:
            # A GPU in MIG mode and its instances, from the NVML agent: NVML has no utilisation
            # for either. An instance's memory is its pod's own (MIG isolates it): stored with
            # no utilisation. The GPU above them is understood, not garbage, and not stored.
            if reading.mig_instance and reading.memory_used_mib is not None:
                readings.append(reading)
            elif reading.uuid not in in_mig_mode:
                garbage += 1
            continue
        reading.util = min(reading.util, 100.0)
        if reading.pod_util is not None:
            reading.pod_util = min(reading.pod_util, 100.0)
        readings.append(reading)
    return readings, garbage


def parse_exposition(text: str) -> tuple[list[DeviceReading], int]:
    """Prometheus text exposition → readings. A payload the parser refuses is ScrapeFailed."""
    def series() -> Iterator[tuple[str, dict[str, str], float]]:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                # the parser names a counter's samples <family>_total; DCGM's counter
                # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL keeps its own name
                name = sample.name
                if family.type == "counter" and name == f"{family.name}_total":
                    name = family.name
                yield name, sample.labels, sample.value

    try:
        triples = list(series())
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ScrapeFailed(f"not Prometheus text: {str(exc)[:200]}") from exc
    if not triples and text.strip():
        raise ScrapeFailed("no metrics in the answer")
    readings, garbage = readings_from_series(triples)
    if not readings and garbage == 0 and not any(name in METRICS for name, _, _ in triples):
        raise ScrapeFailed("no DCGM metrics in the answer")
    return readings, garbage


def parse_promql(body: Any) -> tuple[list[DeviceReading], int, float | None]:
    """A Prometheus `/api/v1/query` answer (vector) → readings, garbage, evaluation time."""
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise ScrapeFailed(f"Prometheus answered no success: {str(error or body)[:200]}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise ScrapeFailed("Prometheus answered no vector")
    triples, garbage, at = [], 0, None
    for item in data["result"]:
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            stamp, value = item["value"]
            at = max(at or 0.0, float(stamp))
            triples.append((labels.pop("__name__", ""), labels, float(value)))
        except (KeyError, TypeError, ValueError, AttributeError):
            garbage += 1
    readings, bad = readings_from_series(triples)
    return readings, garbage + bad, at


# --- fetching --------------------------------------------------------------------------------

async def _fetch_text(session: aiohttp.ClientSession, url: str, *,
                      params: dict[str, str] | None = None,
                      max_bytes: int = MAX_BYTES) -> str:
    async with session.get(url, params=params) as response:
        if response.status != 200:
            raise ScrapeFailed(f"HTTP {response.status}")
        chunks, size = [], 0
        async for chunk in response.content.iter_chunked(65536):
            size += len(chunk)
            if size > max_bytes:
                raise ScrapeFailed(f"answer larger than {max_bytes} bytes")
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


async def _scrape_http(session: aiohttp.ClientSession, target: Target
                       ) -> tuple[list[DeviceReading], int, float | None]:
    if target.source == "prometheus":
        import json

        text = await _fetch_text(session, target.url, params={"query": PROMQL})
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise ScrapeFailed("Prometheus answered no JSON") from exc
        return parse_promql(body)
    readings, garbage = parse_exposition(await _fetch_text(session, target.url))
    return readings, garbage, None


async def _scrape_one(session: aiohttp.ClientSession, target: Target, kube: Kube | None,
                      timeout: float) -> tuple[TargetResult, float | None]:
    started = time.monotonic()
    result, at = TargetResult(target=target), None
    try:
        if target.source == "kubesim":
            assert kube is not None
            text = await asyncio.wait_for(
                asyncio.to_thread(kube.server_get, "/metrics", timeout=timeout), timeout)
            result.readings, result.garbage = parse_exposition(text.decode("utf-8", "replace"))
        else:
            result.readings, result.garbage, at = await asyncio.wait_for(
                _scrape_http(session, target), timeout)
    except TimeoutError:
        result.error = f"no answer within {timeout:g} s"
    except ScrapeFailed as exc:
        result.error = str(exc)
    except (aiohttp.ClientError, KubeError, OSError, UnicodeError) as exc:
        result.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    result.duration_ms = int((time.monotonic() - started) * 1000)
    if result.error:
        log.warning("GPU metrics from %s skipped: %s", target.url, result.error)
    elif result.garbage:
        log.warning("GPU metrics from %s: %d series not understood, skipped", target.url,
                    result.garbage)
    return result, at


async def _scrape_all(targets: list[Target], kube: Kube | None, timeout: float
                      ) -> list[tuple[TargetResult, float | None]]:
    client_timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
    connector = aiohttp.TCPConnector(limit=32, force_close=True)
    async with aiohttp.ClientSession(timeout=client_timeout, connector=connector,
                                     headers={"Accept": "text/plain"}) as session:
        return list(await asyncio.gather(*(_scrape_one(session, t, kube, timeout)
                                           for t in targets)))


def scrape_targets(targets: list[Target], *, kube: Kube | None = None,
                   timeout: float | None = None) -> list[tuple[TargetResult, float | None]]:
    """Fetch and parse every target concurrently: (result, Prometheus evaluation time) each.
    Never raises for a target's failure; that is in its result."""
    if not targets:
        return []
    timeout = float(timeout or settings.PORTAL_USAGE_SCRAPE_TIMEOUT)
    return asyncio.run(_scrape_all(targets, kube, timeout))


# --- discovery -------------------------------------------------------------------------------

_kubesim_checked: dict[str, tuple[float, bool]] = {}  # server URL → (when, serves DCGM)


def _exporter_targets(kube: Kube, service: str) -> list[Target] | None:
    """The exporter Service's ready endpoints; None when there is no such Endpoints object."""
    namespace, _, name = service.partition("/")
    if not namespace or not name:
        log.warning("PORTAL_GPU_EXPORTER_SERVICE=%r is not namespace/name", service)
        return None
    try:
        endpoints = kube.get("Endpoints", name, namespace)
    except NotFound:
        return None
    if endpoints is None:
        return None
    default_port = int(settings.PORTAL_GPU_EXPORTER_PORT)
    targets = []
    for subset in endpoints.get("subsets") or []:
        ports = subset.get("ports") or []
        port = next((p.get("port") for p in ports if p.get("name") in ("metrics", "http-metrics")),
                    None)
        if port is None:
            port = next((p.get("port") for p in ports if p.get("port") == default_port),
                        ports[0].get("port") if len(ports) == 1 else default_port)
        for address in subset.get("addresses") or []:
            ip = address.get("ip")
            if ip:
                host = f"[{ip}]" if ":" in ip else ip
                targets.append(Target(f"http://{host}:{port}/metrics", "exporter"))
    return sorted(set(targets), key=lambda t: t.url)


def _serves_dcgm(kube: Kube) -> bool:
    server = kube.server
    checked = _kubesim_checked.get(server)
    now = time.monotonic()
    if checked is not None and now - checked[0] < KUBESIM_RECHECK_SECONDS:
        return checked[1]
    try:
        body = kube.server_get("/metrics", timeout=float(settings.PORTAL_USAGE_SCRAPE_TIMEOUT))
        answer = b"DCGM_FI_DEV_" in body[:1_000_000]
    except KubeError as exc:
        log.info("the API server's /metrics is no GPU exporter: %s", exc)
        answer = False
    _kubesim_checked.clear()  # one cluster per process: keep the memory flat
    _kubesim_checked[server] = (now, answer)
    return answer


def discover_targets(kube: Kube | None = None) -> list[Target]:
    """The exporters to scrape this cycle, by the order in the module's docstring."""
    prometheus = settings.PORTAL_PROMETHEUS_URL.strip().rstrip("/")
    if prometheus:
        return [Target(f"{prometheus}/api/v1/query", "prometheus")]
    static = sorted({url.strip() for url in settings.PORTAL_GPU_EXPORTER_URLS if url.strip()})
    if static:
        return [Target(url, "exporter") for url in static]
    kube = kube or Kube()
    service = settings.PORTAL_GPU_EXPORTER_SERVICE.strip()
    if service:
        targets = _exporter_targets(kube, service)
        if targets is not None:
            return targets
    if _serves_dcgm(kube):
        return [Target(f"{kube.server}/metrics", "kubesim")]
    return []
