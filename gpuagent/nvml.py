"""The NVML calls the agent needs, behind one small interface.

`GpuReader` is what the sampler talks to. `NvmlReader` implements it over nvidia-ml-py
(module `pynvml`, a ctypes binding of the driver's libnvidia-ml.so.1); `FakeReader` implements
it for tests and for `python -m gpuagent --fake`, and can be scripted: utilisation traces, an
XID error, a GPU that falls off the bus, a node without a driver. `FakeReader.from_node_file`
gives it the GPUs of one simulated node and the workload each runs, from a JSON file the node's
simulator keeps up to date (see "The node file" in README.md).

Readers translate NVML's errors into three of their own, so nothing above this module imports
pynvml: `NvmlUnavailable` (no library, no driver, init failed), `GpuLost`
(NVML_ERROR_GPU_IS_LOST) and `NvmlError` for the rest. A field a GPU does not support
(NVML_ERROR_NOT_SUPPORTED: energy on pre-Volta boards, ECC on GeForce) reads as None; any other
failure of one field also reads as None and is named in `GpuReading.errors`.

Units are NVML's: bytes, percent, °C, milliwatts, millijoules. The exporter converts to
dcgm-exporter's (MiB, W).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class NvmlError(Exception):
    """An NVML call failed."""


class NvmlUnavailable(NvmlError):
    """NVML cannot be used on this node: no library, no driver, or nvmlInit failed."""


class GpuLost(NvmlError):
    """The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST): it answers nothing until a reset."""


@dataclass(frozen=True)
class GpuInfo:
    """What identifies one GPU; read once, it does not change while the driver is loaded."""

    index: int
    uuid: str  # "GPU-…"
    name: str  # NVML's product name, dcgm-exporter's modelName: "NVIDIA A100-SXM4-80GB"
    pci_bus_id: str  # "00000000:3B:00.0"


@dataclass(frozen=True)
class GpuReading:
    """One sample of one GPU, in NVML's units. None: not supported or failed (see errors)."""

    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    # used and free as nvidia-smi and dcgm-exporter show them: the driver's own reservation is
    # neither (NVML's v2 memory information; v1 counted it as used: 480 MiB "used" on an idle
    # H100); total = used + free + reserved
    mem_used_bytes: int | None = None
    mem_free_bytes: int | None = None
    mem_total_bytes: int | None = None
    mem_reserved_bytes: int | None = None  # None: the driver has no v2 memory information
    temperature_c: float | None = None
    power_mw: float | None = None
    energy_mj: int | None = None  # total since the driver loaded
    ecc_dbe_volatile: int | None = None  # double-bit (uncorrected) errors since the driver loaded
    errors: dict[str, str] = field(default_factory=dict)  # field name → NVML's message


@dataclass(frozen=True)
class XidEvent:
    uuid: str
    xid: int


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU (`nvmlDeviceGetComputeRunningProcesses`)."""

    pid: int  # in the host's PID namespace
    used_memory_bytes: int | None  # None: NVML cannot say
    gpu_instance_id: int | None = None  # the MIG instance it runs in; None without MIG


@dataclass(frozen=True)
class ProcessUtilization:
    """One sample of one process's share of a GPU (`nvmlDeviceGetProcessUtilization`): the
    percent of the sample period its kernels kept the SMs busy, and its memory bandwidth."""

    pid: int
    timestamp_us: int  # CPU timestamp of the sample, microseconds
    sm_util_pct: float
    mem_util_pct: float


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance of a GPU in MIG mode, as NVML enumerates it."""

    uuid: str  # "MIG-…": the id the device plugin hands out
    gpu_instance_id: int  # dcgm-exporter's GPU_I_ID
    profile: str  # dcgm-exporter's GPU_I_PROFILE: "1g.10gb"
    mem_used_bytes: int | None = None
    mem_free_bytes: int | None = None


def mig_profile(name: str) -> str:
    """The profile in a MIG device's NVML name: "NVIDIA A100-SXM4-80GB MIG 1g.10gb" → "1g.10gb"."""
    return name.rsplit("MIG ", 1)[-1].strip() if "MIG " in name else name.strip()


class GpuReader(Protocol):
    """The NVML calls the agent makes. All may raise NvmlError; `open` raises NvmlUnavailable."""

    def open(self) -> None:
        """nvmlInit, and registration for XID events. Safe to call again after a failure."""

    def close(self) -> None:
        """nvmlShutdown; the reader may be opened again."""

    def driver_version(self) -> str: ...

    def device_count(self) -> int: ...

    def device_info(self, index: int) -> GpuInfo:
        """Raises GpuLost when the GPU at that index is lost."""
        ...

    def read(self, index: int) -> GpuReading:
        """Raises GpuLost when the GPU at that index is lost."""
        ...

    def xid_events(self) -> list[XidEvent]:
        """XID errors reported since the last call; never waits."""
        ...

    def compute_processes(self, index: int) -> list[GpuProcess] | None:
        """The compute processes on the GPU; None where NVML does not support asking."""
        ...

    def process_utilization(
        self, index: int, since_us: int
    ) -> list[ProcessUtilization] | None:
        """Per-process utilisation samples newer than `since_us` (0: all the driver keeps);
        [] when there are none, None where NVML does not support it (MIG mode, old boards)."""
        ...

    def mig_devices(self, index: int) -> list[MigDevice]:
        """The GPU's MIG instances, with their memory; [] for a GPU not in MIG mode."""
        ...


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlReader:
    """`GpuReader` over nvidia-ml-py. `nvml` is the pynvml module (a stand-in in tests)."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml
        self._event_set: Any = None
        self._opened = False
        self._lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self._opened:
                return
            if self._nvml is None:
                try:
                    import pynvml
                except ImportError as exc:  # the package itself is missing
                    raise NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}") from exc
                self._nvml = pynvml
            nvml = self._nvml
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as exc:
                raise NvmlUnavailable(f"nvmlInit: {exc}") from exc
            except OSError as exc:  # a broken libnvidia-ml.so.1
                raise NvmlUnavailable(f"nvmlInit: {exc}") from exc
            self._opened = True
            self._event_set = self._register_xid_events()

    def _register_xid_events(self) -> Any:
        """One event set for every GPU that supports XID events; None when none does."""
        nvml = self._m
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError:
            return None
        registered = 0
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError:
            count = 0  # the next call that needs it reports the error
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except nvml.NVMLError:
                continue  # not supported on this board, or lost: it is read without events
        if not registered:
            nvml.nvmlEventSetFree(event_set)
            return None
        return event_set

    def close(self) -> None:
        with self._lock:
            if not self._opened:
                return
            nvml = self._m
            try:
                if self._event_set is not None:
                    nvml.nvmlEventSetFree(self._event_set)
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass
            self._event_set = None
            self._opened = False

    @property
    def _m(self) -> Any:
        if self._nvml is None or not self._opened:
            raise NvmlUnavailable("NVML is not initialised")
        return self._nvml

    # -- calls ------------------------------------------------------------------------------

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        nvml = self._m
        try:
            return fn(*args)
        except nvml.NVMLError_GpuIsLost as exc:
            raise GpuLost(str(exc)) from exc
        except nvml.NVMLError_Uninitialized as exc:
            raise NvmlUnavailable(str(exc)) from exc
        except nvml.NVMLError as exc:
            raise NvmlError(f"{getattr(fn, '__name__', 'nvml')}: {exc}") from exc

    def driver_version(self) -> str:
        return _text(self._call(self._m.nvmlSystemGetDriverVersion))

    def device_count(self) -> int:
        return int(self._call(self._m.nvmlDeviceGetCount))

    def _handle(self, index: int) -> Any:
        return self._call(self._m.nvmlDeviceGetHandleByIndex, index)

    def device_info(self, index: int) -> GpuInfo:
        nvml = self._m
        handle = self._handle(index)
        return GpuInfo(
            index=index,
            uuid=_text(self._call(nvml.nvmlDeviceGetUUID, handle)),
            name=_text(self._call(nvml.nvmlDeviceGetName, handle)),
            pci_bus_id=_text(self._call(nvml.nvmlDeviceGetPciInfo, handle).busId),
        )

    def read(self, index: int) -> GpuReading:
        nvml = self._m
        handle = self._handle(index)
        errors: dict[str, str] = {}

        def optional(name: str, fn: Callable[..., T], *args: Any) -> T | None:
            try:
                return self._call(fn, handle, *args)
            except GpuLost:
                raise
            except NvmlError as exc:
                if not isinstance(exc.__cause__, nvml.NVMLError_NotSupported):
                    errors[name] = str(exc)
                return None

        util = optional("utilization", nvml.nvmlDeviceGetUtilizationRates)
        memory = self._memory(handle)
        if memory is None:  # a driver before v2 (R510): v1, whose "used" holds the reserved
            memory = optional("memory", nvml.nvmlDeviceGetMemoryInfo)
        temperature = optional(
            "temperature", nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU
        )
        power = optional("power", nvml.nvmlDeviceGetPowerUsage)
        energy = optional("energy", nvml.nvmlDeviceGetTotalEnergyConsumption)
        ecc = optional(
            "ecc_dbe",
            nvml.nvmlDeviceGetTotalEccErrors,
            nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nvml.NVML_VOLATILE_ECC,
        )
        return GpuReading(
            gpu_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            mem_used_bytes=None if memory is None else int(memory.used),
            mem_free_bytes=None if memory is None else int(memory.free),
            mem_total_bytes=None if memory is None else int(memory.total),
            mem_reserved_bytes=(None if memory is None or not hasattr(memory, "reserved")
                                else int(memory.reserved)),
            temperature_c=None if temperature is None else float(temperature),
            power_mw=None if power is None else float(power),
            energy_mj=None if energy is None else int(energy),
            ecc_dbe_volatile=None if ecc is None else int(ecc),
            errors=errors,
        )

    def _memory(self, handle: Any) -> Any | None:
        """NVML's v2 memory information (used, free and reserved apart), or None where the
        driver or nvidia-ml-py lacks it (the caller falls back to v1)."""
        nvml = self._m
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is None:
            return None
        try:
            return self._call(nvml.nvmlDeviceGetMemoryInfo, handle, version)
        except GpuLost:
            raise
        except NvmlError:
            return None  # FunctionNotFound, ArgumentVersionMismatch, NotSupported …

    def xid_events(self) -> list[XidEvent]:
        nvml = self._m
        if self._event_set is None:
            return []
        events: list[XidEvent] = []
        for _ in range(1024):  # a bound, in case the driver keeps producing them
            try:
                data = nvml.nvmlEventSetWait(self._event_set, 0)
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError as exc:
                raise NvmlError(f"nvmlEventSetWait: {exc}") from exc
            if not data.eventType & nvml.nvmlEventTypeXidCriticalError:
                continue
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(data.device))
            except nvml.NVMLError:
                continue  # lost meanwhile; the sampler reports it as lost
            events.append(XidEvent(uuid=uuid, xid=int(data.eventData)))
        return events


    def _supported(self, fn: Callable[..., T], *args: Any) -> T | None:
        """fn's answer, or None where NVML says the GPU does not support it."""
        nvml = self._m
        try:
            return self._call(fn, *args)
        except GpuLost:
            raise
        except NvmlError as exc:
            if isinstance(exc.__cause__, nvml.NVMLError_NotSupported):
                return None
            raise

    def compute_processes(self, index: int) -> list[GpuProcess] | None:
        nvml = self._m
        handle = self._handle(index)
        found = self._supported(nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        if found is None:
            return None
        processes = []
        for process in found:
            used = getattr(process, "usedGpuMemory", None)  # None: NVML_VALUE_NOT_AVAILABLE
            instance = getattr(process, "gpuInstanceId", None)
            processes.append(
                GpuProcess(
                    pid=int(process.pid),
                    used_memory_bytes=None if used is None else int(used),
                    # 0xFFFFFFFF: not in a MIG instance
                    gpu_instance_id=(
                        None if instance is None or instance >= 0xFFFFFFFF else int(instance)
                    ),
                )
            )
        return processes

    def process_utilization(
        self, index: int, since_us: int
    ) -> list[ProcessUtilization] | None:
        nvml = self._m
        handle = self._handle(index)
        try:
            samples = self._supported(nvml.nvmlDeviceGetProcessUtilization, handle, since_us)
        except NvmlError as exc:
            if isinstance(exc.__cause__, nvml.NVMLError_NotFound):
                return []  # no process ran kernels since `since_us`
            raise
        if samples is None:
            return None
        return [
            ProcessUtilization(
                pid=int(sample.pid),
                timestamp_us=int(sample.timeStamp),
                sm_util_pct=float(sample.smUtil),
                mem_util_pct=float(sample.memUtil),
            )
            for sample in samples
        ]

    def mig_devices(self, index: int) -> list[MigDevice]:
        nvml = self._m
        handle = self._handle(index)
        try:
            mode = self._supported(nvml.nvmlDeviceGetMigMode, handle)
        except GpuLost:
            raise
        except NvmlError:
            return []
        if mode is None or mode[0] != nvml.NVML_DEVICE_MIG_ENABLE:
            return []
        devices = []
        for slot in range(int(self._call(nvml.nvmlDeviceGetMaxMigDeviceCount, handle))):
            try:
                mig = self._call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
            except GpuLost:
                raise
            except NvmlError:
                continue  # NOT_FOUND: no instance in this slot
            try:
                memory = self._supported(nvml.nvmlDeviceGetMemoryInfo, mig)
            except GpuLost:
                raise
            except NvmlError:
                memory = None
            devices.append(
                MigDevice(
                    uuid=_text(self._call(nvml.nvmlDeviceGetUUID, mig)),
                    gpu_instance_id=int(self._call(nvml.nvmlDeviceGetGpuInstanceId, mig)),
                    profile=mig_profile(_text(self._call(nvml.nvmlDeviceGetName, mig))),
                    mem_used_bytes=None if memory is None else int(memory.used),
                    mem_free_bytes=None if memory is None else int(memory.free),
                )
            )
        return devices


# -- the fake ------------------------------------------------------------------------------

A100_80GB = 80 * 1024**3


def driver_reserved_bytes(total_bytes: int) -> int:
    """What the driver keeps of a GPU's memory for itself, neither used nor free: about 0.6 %
    (an H100 80GB on driver 580 reserves 479 of 81,559 MiB), in whole MiB."""
    return total_bytes // 170 // 2**20 * 2**20


@dataclass(frozen=True)
class Workload:
    """The GPU utilisation (%) a simulated pod's work produces, one value per sample. The
    values after `warmup` repeat; those before it are played once (start-up)."""

    util: tuple[float, ...]
    warmup: int = 0


# The workloads a simulated pod can run, under the names kubesim gives them (its annotation
# `kubesim.io/gpu-trace`); an unknown name runs the default, as in kubesim.
WORKLOADS: dict[str, Workload] = {
    # a training loop, with a dip for a checkpoint
    "busy": Workload((92.0, 95.0, 88.0, 97.0, 94.0, 41.0, 90.0, 96.0)),
    # something loaded (a notebook kernel), nothing running: below the 2 % idle culling sees
    "idle": Workload((0.4, 1.1, 0.0, 1.5, 0.7)),
    # bursts of work between near-idle gaps
    "bursty": Workload((0.0, 3.0, 78.0, 100.0, 91.0, 40.0, 2.0, 0.0)),
    # warming up over 30 samples (data loading, compilation), then a plateau
    "ramp": Workload(
        tuple(round(5 + 85 * s / 30, 1) for s in range(30)) + (90.0, 93.0, 89.0, 94.0),
        warmup=30,
    ),
}
DEFAULT_WORKLOAD = "busy"


@dataclass
class FakeProcess:
    """A scripted compute process on a FakeGpu. Its utilisation follows the GPU's step; with
    processes on it, the GPU's own utilisation is their sum (at most 100 %)."""

    pid: int
    util_trace: Sequence[float] = (0.0,)
    mem_used_bytes: int | None = 512 * 2**20
    gpu_instance_id: int | None = None
    pod: tuple[str, str] | None = None  # (namespace, pod): what /proc/<pid>/cgroup would say


@dataclass
class FakeGpu:
    """One scripted GPU. Traces are cycled, one value per `read`."""

    uuid: str
    name: str = "NVIDIA A100-SXM4-80GB"
    pci_bus_id: str = "00000000:07:00.0"
    memory_total_bytes: int = A100_80GB
    util_trace: Sequence[float] = (0.0,)
    mem_util_trace: Sequence[float] = (0.0,)
    mem_used_trace: Sequence[int] = (1024**3,)  # bytes
    temperature_trace: Sequence[float] = (30.0,)
    power_mw_trace: Sequence[float] = (60_000.0,)
    energy_mj: int = 0
    ecc_dbe: int = 0
    lost: bool = False
    unsupported: frozenset[str] = frozenset()  # field names that read as None
    step: int = 0  # where the traces are: back to 0 when what runs on the GPU changes
    reads: int = 0  # every read since the reader began: the clock of per-process samples
    warmup: int = 0  # trace values before this index are played once, the rest repeat
    workload: str | None = None  # what `run` put on it
    idle_power_mw: float = 62_000.0  # the board's power range, for `run`
    max_power_mw: float = 400_000.0
    processes: list[FakeProcess] = field(default_factory=list)
    process_util_supported: bool = True  # False: as in MIG mode or on old boards
    mig: list[MigDevice] = field(default_factory=list)

    def at(self, trace: Sequence[T]) -> T:
        return self.at_step(trace, self.step)

    def at_step(self, trace: Sequence[T], step: int) -> T:
        if step < len(trace):
            return trace[step]
        start = min(self.warmup, len(trace) - 1)
        return trace[start + (step - start) % (len(trace) - start)]

    def run(self, workload: str | None) -> None:
        """Run a named workload (`WORKLOADS`) on this GPU from its first sample on; None: nothing
        runs (0 %, no memory used, idle power). Memory, temperature and power follow the
        utilisation."""
        util: tuple[float, ...] = (0.0,)
        warmup = 0
        if workload is not None:
            chosen = WORKLOADS.get(workload) or WORKLOADS[DEFAULT_WORKLOAD]
            util, warmup = chosen.util, chosen.warmup
        total = self.memory_total_bytes
        span = self.max_power_mw - self.idle_power_mw
        self.util_trace = util
        self.mem_util_trace = tuple(round(u * 0.55, 1) for u in util)
        self.mem_used_trace = (
            (0,) if workload is None else tuple(int(total * (0.04 + 0.86 * u / 100)) for u in util)
        )
        self.temperature_trace = tuple(round(30 + u * 0.42, 1) for u in util)
        self.power_mw_trace = tuple(self.idle_power_mw + span * u / 100 * 0.92 for u in util)
        self.warmup = warmup
        self.workload = workload
        self.step = 0


def _node_file_mig(entry: dict[str, Any]) -> list[MigDevice]:
    """A node file GPU's `mig` instances: memory as the workload of the pod holding each uses
    it (none held: nothing used). NVML has no utilisation per instance, so none is scripted."""
    instances = []
    for instance in entry.get("mig") or ():
        total = int(instance["memoryMiB"]) * 2**20
        workload = instance.get("workload")
        used = 0
        if workload is not None:
            chosen = WORKLOADS.get(str(workload)) or WORKLOADS[DEFAULT_WORKLOAD]
            mean = sum(chosen.util) / len(chosen.util)
            used = int(total * (0.04 + 0.86 * mean / 100))
        instances.append(MigDevice(str(instance["uuid"]), int(instance["gpuInstanceId"]),
                                   str(instance["profile"]), used, total - used))
    return instances


def _node_file_processes(entry: dict[str, Any]) -> list[FakeProcess]:
    """A node file GPU's `processes`: one per pod on a shared GPU, with the workload it runs."""
    processes = []
    for process in entry.get("processes") or ():
        workload = WORKLOADS.get(str(process.get("workload"))) or WORKLOADS[DEFAULT_WORKLOAD]
        processes.append(
            FakeProcess(
                pid=int(process["pid"]),
                util_trace=workload.util,
                mem_used_bytes=int(process.get("memoryMiB", 512)) * 2**20,
                pod=(str(process["namespace"]), str(process["pod"])),
            )
        )
    return processes


class FakeReader:
    """`GpuReader` for tests and demos; scripted through its methods and `gpus`."""

    def __init__(
        self,
        gpus: Iterable[FakeGpu] = (),
        *,
        driver_version: str = "535.154.05",
        available: bool = True,
        seconds_per_read: float = 5.0,
    ) -> None:
        self.gpus = list(gpus)
        self.version = driver_version
        self.available = available
        self.seconds_per_read = seconds_per_read
        self.opened = False
        self.open_calls = 0
        self._xids: list[XidEvent] = []
        self._lock = threading.Lock()
        self.node_file: str | None = None  # followed by `read` when set (from_node_file)
        self._node_file_seen: tuple[int, int, int] | None = None

    @classmethod
    def demo(cls, count: int = 4) -> FakeReader:
        """A node of A100s with distinct traces: busy, idle, bursty, free."""
        traces: list[Sequence[float]] = [
            (92.0, 95.0, 88.0, 97.0),
            (0.0,),
            (0.0, 0.0, 75.0, 100.0, 40.0, 0.0),
            (0.0,),
        ]
        gpus = [
            FakeGpu(
                uuid=f"GPU-fa4e0000-0000-4000-8000-{index:012x}",
                pci_bus_id=f"00000000:{0x07 + index * 8:02X}:00.0",
                util_trace=traces[index % len(traces)],
                mem_util_trace=tuple(u * 0.6 for u in traces[index % len(traces)]),
                mem_used_trace=tuple(
                    int(A100_80GB * (0.05 + u / 120)) for u in traces[index % len(traces)]
                ),
                temperature_trace=tuple(31 + u * 0.4 for u in traces[index % len(traces)]),
                power_mw_trace=tuple(62_000 + u * 3_300 for u in traces[index % len(traces)]),
            )
            for index in range(count)
        ]
        return cls(gpus)

    @classmethod
    def from_node_file(cls, path: str | os.PathLike[str]) -> FakeReader:
        """The GPUs of one simulated node, described by a JSON file (README.md, "The node
        file"): their identity is read here, once, as NVML's would be; the workload each runs
        is read again whenever the file changes. Raises ValueError for a file it cannot use."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            gpus = [
                FakeGpu(
                    uuid=str(entry["uuid"]),
                    name=str(entry["name"]),
                    pci_bus_id=str(entry["pciBusId"]),
                    memory_total_bytes=int(entry["memoryMiB"]) * 1024**2,
                    idle_power_mw=float(entry.get("idleWatts", 62.0)) * 1000,
                    max_power_mw=float(entry.get("maxWatts", 400.0)) * 1000,
                    # in MIG mode NVML reads no utilisation of the GPU or per process
                    unsupported=frozenset({"utilization"}) if entry.get("mig") else frozenset(),
                    process_util_supported=not entry.get("mig"),
                )
                for entry in data["gpus"]
            ]
            driver = str(data.get("driverVersion") or "535.154.05")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{os.fspath(path)}: not a node file: {exc!r}") from exc
        reader = cls(gpus, driver_version=driver)
        for gpu in gpus:
            gpu.run(None)
        reader.node_file = os.fspath(path)
        reader._follow_node_file()
        return reader

    def _follow_node_file(self) -> None:
        """Take the workloads from the node file if it changed since last read. The simulator
        replaces it whole (write, then rename); a missing or broken file keeps the last ones."""
        if self.node_file is None:
            return
        try:
            stat = os.stat(self.node_file)
            seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            if seen == self._node_file_seen:
                return
            with open(self.node_file, encoding="utf-8") as fh:
                entries = json.load(fh)["gpus"]
            workloads = [entry.get("workload") for entry in entries]
            processes = [_node_file_processes(entry) for entry in entries]
            instances = [_node_file_mig(entry) for entry in entries]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return
        self._node_file_seen = seen
        for gpu, mig in zip(self.gpus, instances, strict=False):
            gpu.mig = mig
        for gpu, workload, running in zip(self.gpus, workloads, processes, strict=False):
            workload = None if workload is None else str(workload)
            if workload != gpu.workload:
                gpu.run(workload)
            if [p.pid for p in running] != [p.pid for p in gpu.processes]:
                gpu.processes = running
                gpu.step = 0

    def process_pods(self) -> dict[int, tuple[str, str]]:
        """PID → (namespace, pod) of the scripted processes: what the cgroup of each would say
        on a real node."""
        return {
            process.pid: process.pod
            for gpu in self.gpus
            for process in gpu.processes
            if process.pod is not None
        }

    # -- scripting --------------------------------------------------------------------------

    def inject_xid(self, index: int, xid: int) -> None:
        with self._lock:
            self._xids.append(XidEvent(self.gpus[index].uuid, xid))

    def lose(self, index: int) -> None:
        self.gpus[index].lost = True

    def recover(self, index: int) -> None:
        self.gpus[index].lost = False

    # -- GpuReader --------------------------------------------------------------------------

    def open(self) -> None:
        self.open_calls += 1
        if not self.available:
            raise NvmlUnavailable("nvmlInit: NVML Shared Library Not Found")
        self.opened = True

    def close(self) -> None:
        self.opened = False

    def _check(self) -> None:
        if not self.available:
            self.opened = False
            raise NvmlUnavailable("NVML is not initialised")
        if not self.opened:
            raise NvmlUnavailable("NVML is not initialised")

    def _gpu(self, index: int) -> FakeGpu:
        self._check()
        if not 0 <= index < len(self.gpus):
            raise NvmlError(f"nvmlDeviceGetHandleByIndex: Invalid Argument ({index})")
        gpu = self.gpus[index]
        if gpu.lost:
            raise GpuLost("GPU is lost")
        return gpu

    def driver_version(self) -> str:
        self._check()
        return self.version

    def device_count(self) -> int:
        self._check()
        return len(self.gpus)

    def device_info(self, index: int) -> GpuInfo:
        gpu = self._gpu(index)
        return GpuInfo(index=index, uuid=gpu.uuid, name=gpu.name, pci_bus_id=gpu.pci_bus_id)

    def read(self, index: int) -> GpuReading:
        self._follow_node_file()
        gpu = self._gpu(index)
        reserved = driver_reserved_bytes(gpu.memory_total_bytes)
        used = min(gpu.at(gpu.mem_used_trace), gpu.memory_total_bytes - reserved)
        power = gpu.at(gpu.power_mw_trace)
        gpu.energy_mj += int(power * self.seconds_per_read)  # mW × s = mJ

        def unless(name: str, value: T) -> T | None:
            return None if name in gpu.unsupported else value

        util = gpu.at(gpu.util_trace)
        if gpu.processes:
            util = min(100.0, sum(gpu.at(process.util_trace) for process in gpu.processes))
        reading = GpuReading(
            gpu_util_pct=unless("utilization", util),
            mem_util_pct=unless("utilization", gpu.at(gpu.mem_util_trace)),
            mem_used_bytes=unless("memory", used),
            mem_free_bytes=unless("memory", gpu.memory_total_bytes - reserved - used),
            mem_total_bytes=unless("memory", gpu.memory_total_bytes),
            mem_reserved_bytes=unless("memory", reserved),
            temperature_c=unless("temperature", gpu.at(gpu.temperature_trace)),
            power_mw=unless("power", power),
            energy_mj=unless("energy", gpu.energy_mj),
            ecc_dbe_volatile=unless("ecc_dbe", gpu.ecc_dbe),
        )
        gpu.step += 1
        gpu.reads += 1
        return reading

    def xid_events(self) -> list[XidEvent]:
        self._check()
        with self._lock:
            events, self._xids = self._xids, []
        return events

    def compute_processes(self, index: int) -> list[GpuProcess] | None:
        gpu = self._gpu(index)
        return [
            GpuProcess(process.pid, process.mem_used_bytes, process.gpu_instance_id)
            for process in gpu.processes
        ]

    def process_utilization(
        self, index: int, since_us: int
    ) -> list[ProcessUtilization] | None:
        """A sample per process that ran kernels during the last `read` (an idle process has
        none, as with NVML), stamped at that read. Stamps only grow, as NVML's CPU timestamps
        do, when the traces start again for processes that changed: a stamp counted from the
        trace's step went back, and the sampler took the new samples for ones it had seen."""
        gpu = self._gpu(index)
        if not gpu.process_util_supported:
            return None
        if gpu.step == 0:
            return []
        stamp = int(gpu.reads * self.seconds_per_read * 1_000_000)
        if stamp <= since_us:
            return []
        last = gpu.step - 1
        samples = []
        for process in gpu.processes:
            sm = gpu.at_step(process.util_trace, last)
            if sm > 0:
                samples.append(ProcessUtilization(process.pid, stamp, sm, round(sm * 0.55, 1)))
        return samples

    def mig_devices(self, index: int) -> list[MigDevice]:
        return list(self._gpu(index).mig)
