"""Sampling on an interval, in a background thread, into immutable snapshots.

A scrape reads the latest `Snapshot` and never calls NVML or the kubelet, so a slow or hung
driver delays samples, not scrapes (and `/healthz` turns 503 when samples stop coming).

What failed is part of the snapshot: NVML missing (the agent keeps serving its own metrics and
retries nvmlInit every cycle), a GPU that is lost, a field that could not be read, the kubelet
that did not answer (GPUs are then exported without pod labels).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuagent.nvml import (
    GpuInfo,
    GpuLost,
    GpuReader,
    GpuReading,
    MigDevice,
    NvmlError,
    NvmlUnavailable,
)
from gpuagent.podresources import Holder, Holders, PodMapper, PodMappingError
from gpuagent.processes import NoProcessMapping, ProcessMapper, ProcessMappingError

log = logging.getLogger("gpuagent")


@dataclass(frozen=True)
class PodUsage:
    """What one pod holding a replica of a time-sliced GPU used of it in the last cycle.

    `scope` "process": the pod's own processes' figures (NVML's per-process utilisation, the
    sum over the pod's PIDs; memory from the compute processes); a pod with no process that ran
    kernels reads 0. `scope` "device": NVML had no per-process figures (or processes could not
    be attributed), so the figures are the whole GPU's, shared with every other pod on it.
    """

    holder: Holder
    scope: str  # "process" | "device"
    gpu_util_pct: float | None
    mem_util_pct: float | None
    fb_used_bytes: int | None


@dataclass(frozen=True)
class MigSample:
    """A MIG instance of a GPU in MIG mode, and the containers holding it."""

    device: MigDevice
    holders: tuple[Holder, ...]


@dataclass(frozen=True)
class GpuSample:
    info: GpuInfo
    reading: GpuReading
    # every container holding the GPU: one for a whole GPU, one per pod holding a replica of a
    # time-sliced GPU, none for a free GPU
    holders: tuple[Holder, ...]
    last_xid: int  # 0: none since the agent started
    pods: tuple[PodUsage, ...] = ()  # per holder, for a time-sliced GPU
    mig: tuple[MigSample, ...] = ()

    @property
    def holder(self) -> Holder | None:
        """The first holder, or None."""
        return self.holders[0] if self.holders else None

    @property
    def shared(self) -> bool:
        """Held as time-sliced replicas: what NVML says of the device is every holder's."""
        return any(holder.shared for holder in self.holders)


@dataclass(frozen=True)
class LostGpu:
    index: int
    info: GpuInfo | None  # None when it was lost before the agent could identify it


@dataclass(frozen=True)
class Snapshot:
    taken_at: float  # wall clock, seconds
    hostname: str
    driver_version: str = ""
    gpus: tuple[GpuSample, ...] = ()
    lost: tuple[LostGpu, ...] = ()
    nvml_error: str | None = None  # None: NVML answered
    pod_mapping_error: str | None = None
    gpu_errors: tuple[str, ...] = ()  # GPUs left out of this cycle, and why
    field_errors: int = 0  # GPUs and fields of this cycle that failed (not "not supported")

    @property
    def nvml_up(self) -> bool:
        return self.nvml_error is None


@dataclass
class Counters:
    """Totals since the agent started, exported as the agent's own metrics."""

    cycles: int = 0
    nvml_errors: int = 0
    pod_mapping_errors: int = 0
    field_errors: int = 0
    xid_events: int = 0
    cycle_seconds: float = 0.0


@dataclass
class Sampler:
    reader: GpuReader
    mapper: PodMapper
    hostname: str
    interval: float = 5.0
    clock: Callable[[], float] = time.time
    counters: Counters = field(default_factory=Counters)
    processes: ProcessMapper = field(default_factory=NoProcessMapping)

    def __post_init__(self) -> None:
        self._snapshot = Snapshot(
            taken_at=0.0, hostname=self.hostname, nvml_error="not sampled yet"
        )
        self._identities: dict[int, GpuInfo] = {}
        self._last_xid: dict[str, int] = {}
        self._util_since: dict[str, int] = {}  # GPU UUID → newest process sample seen (µs)
        self._opened = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_problems: tuple[str, ...] = ()
        self.last_cycle_monotonic: float | None = None

    # -- reading ----------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot  # replaced whole, never mutated: no lock needed

    def sample_once(self) -> Snapshot:
        started = time.monotonic()
        snapshot = self._sample()
        self._snapshot = snapshot
        self.counters.cycles += 1
        self.counters.cycle_seconds += time.monotonic() - started
        self.last_cycle_monotonic = time.monotonic()
        self._log_problems(snapshot)
        return snapshot

    def _sample(self) -> Snapshot:
        now = self.clock()
        holders, mapping_error = self._holders()
        try:
            if not self._opened:
                self.reader.open()
                self._opened = True
                self._identities.clear()
            driver = self.reader.driver_version()
            count = self.reader.device_count()
            self._collect_xids()
            gpus: list[GpuSample] = []
            lost: list[LostGpu] = []
            gpu_errors: list[str] = []
            field_errors = 0
            for index in range(count):
                try:
                    info = self._identity(index)
                    reading = self.reader.read(index)
                except GpuLost:
                    lost.append(LostGpu(index, self._identities.get(index)))
                    continue
                except NvmlUnavailable:
                    raise
                except NvmlError as exc:  # this GPU only; it is left out of this cycle
                    gpu_errors.append(f"GPU {index}: {exc}")
                    continue
                field_errors += len(reading.errors)
                held = holders.get(info.uuid, ())
                try:
                    pods = self._pod_usage(index, info.uuid, reading, held)
                    mig = tuple(
                        MigSample(device, holders.get(device.uuid, ()))
                        for device in self.reader.mig_devices(index)
                    )
                except GpuLost:
                    lost.append(LostGpu(index, info))
                    continue
                gpus.append(
                    GpuSample(
                        info, reading, held, self._last_xid.get(info.uuid, 0), pods, mig
                    )
                )
        except NvmlError as exc:
            self.counters.nvml_errors += 1
            if isinstance(exc, NvmlUnavailable) or not self._opened:
                self._reopen_next_cycle()
            return Snapshot(
                taken_at=now,
                hostname=self.hostname,
                nvml_error=str(exc) or type(exc).__name__,
                pod_mapping_error=mapping_error,
            )
        field_errors += len(gpu_errors)
        self.counters.field_errors += field_errors
        return Snapshot(
            taken_at=now,
            hostname=self.hostname,
            driver_version=driver,
            gpus=tuple(gpus),
            lost=tuple(lost),
            pod_mapping_error=mapping_error,
            gpu_errors=tuple(gpu_errors),
            field_errors=field_errors,
        )

    def _pod_usage(
        self, index: int, uuid: str, reading: GpuReading, held: tuple[Holder, ...]
    ) -> tuple[PodUsage, ...]:
        """Each holder's own figures on a time-sliced GPU: the GPU's processes, attributed to
        pods by their cgroups, matched against the holders the kubelet named. Where NVML has no
        per-process figures, or no process can be attributed, every holder gets the device's
        figures marked "device". Raises GpuLost."""
        if not any(holder.shared for holder in held):
            return ()
        device = tuple(
            PodUsage(holder, "device", reading.gpu_util_pct, reading.mem_util_pct,
                     reading.mem_used_bytes)
            for holder in held
        )
        try:
            processes = self.reader.compute_processes(index)
            samples = self.reader.process_utilization(index, self._util_since.get(uuid, 0))
        except NvmlUnavailable:
            raise
        except GpuLost:
            raise
        except NvmlError as exc:
            log.debug("per-process figures of %s: %s", uuid, exc)
            return device
        if processes is None or samples is None:
            return device
        if samples:
            self._util_since[uuid] = max(sample.timestamp_us for sample in samples)
        by_pod: dict[tuple[str, str], Holder] = {}
        for holder in held:
            by_pod.setdefault((holder.namespace, holder.pod), holder)
        owner: dict[int, Holder] = {}
        try:
            for pid in {p.pid for p in processes} | {s.pid for s in samples}:
                pod = self.processes.pod_of(pid)
                if pod is not None and pod in by_pod:
                    owner[pid] = by_pod[pod]
        except ProcessMappingError as exc:
            log.debug("processes of %s: %s", uuid, exc)
            return device
        sm: dict[Holder, float] = {}
        mem: dict[Holder, float] = {}
        # the mean of each process's samples in the period, summed over the pod's processes
        per_pid: dict[int, list[tuple[float, float]]] = {}
        for sample in samples:
            per_pid.setdefault(sample.pid, []).append((sample.sm_util_pct, sample.mem_util_pct))
        for pid, values in per_pid.items():
            pod_holder = owner.get(pid)
            if pod_holder is None:
                continue  # not one of the holders' (a privileged pod seeing every GPU)
            sm[pod_holder] = sm.get(pod_holder, 0.0) + sum(v[0] for v in values) / len(values)
            mem[pod_holder] = mem.get(pod_holder, 0.0) + sum(v[1] for v in values) / len(values)
        fb: dict[Holder, int] = {}
        for process in processes:
            pod_holder = owner.get(process.pid)
            if pod_holder is not None and process.used_memory_bytes is not None:
                fb[pod_holder] = fb.get(pod_holder, 0) + process.used_memory_bytes
        return tuple(
            PodUsage(holder, "process", min(100.0, sm.get(holder, 0.0)),
                     min(100.0, mem.get(holder, 0.0)), fb.get(holder, 0))
            for holder in held
        )

    def _identity(self, index: int) -> GpuInfo:
        info = self._identities.get(index)
        if info is None:
            info = self._identities[index] = self.reader.device_info(index)
        return info

    def _collect_xids(self) -> None:
        for event in self.reader.xid_events():
            self._last_xid[event.uuid] = event.xid
            self.counters.xid_events += 1
            log.warning("XID %d on %s", event.xid, event.uuid)

    def _holders(self) -> tuple[Holders, str | None]:
        try:
            return self.mapper.holders(), None
        except PodMappingError as exc:
            self.counters.pod_mapping_errors += 1
            return {}, str(exc)

    def _reopen_next_cycle(self) -> None:
        if self._opened:
            self.reader.close()
        self._opened = False

    def _log_problems(self, snapshot: Snapshot) -> None:
        """Log a problem when it appears and when it clears, not every cycle."""
        problems = []
        if snapshot.nvml_error:
            problems.append(f"NVML: {snapshot.nvml_error}")
        if snapshot.pod_mapping_error:
            problems.append(f"pod mapping: {snapshot.pod_mapping_error}")
        problems += [
            f"GPU {gpu.index} ({gpu.info.uuid if gpu.info else '?'}) is lost"
            for gpu in snapshot.lost
        ]
        problems += list(snapshot.gpu_errors)
        problems += [
            f"GPU {gpu.info.index} {name}: {message}"
            for gpu in snapshot.gpus
            for name, message in gpu.reading.errors.items()
        ]
        current = tuple(problems)
        if current != self._last_problems:
            for problem in sorted(set(current) - set(self._last_problems)):
                log.warning("%s", problem)
            for problem in sorted(set(self._last_problems) - set(current)):
                log.info("cleared: %s", problem)
            self._last_problems = current

    # -- the background thread --------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self.sample_once()  # the first scrape already has data
        self._thread = threading.Thread(target=self._run, name="gpuagent-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample_once()
            except Exception:  # a bug must not stop sampling for good
                log.exception("sampling failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5)
            self._thread = None
        self._reopen_next_cycle()
        self.mapper.close()

    def healthy(self) -> bool:
        """False when no sample completed for three intervals: the sampler is stuck."""
        if self.last_cycle_monotonic is None:
            return False
        return time.monotonic() - self.last_cycle_monotonic <= max(3 * self.interval, 10.0)
