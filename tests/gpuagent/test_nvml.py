"""NvmlReader: the real nvidia-ml-py where it can run here (no driver), and its translation of
NVML's answers and errors over a stand-in of the pynvml module (no GPU on this machine)."""

from __future__ import annotations

import types
from collections import deque
from typing import Any

import pynvml
import pytest

from gpuagent.nvml import (
    GpuInfo,
    GpuLost,
    GpuProcess,
    MigDevice,
    NvmlError,
    NvmlReader,
    NvmlUnavailable,
    ProcessUtilization,
    XidEvent,
)

MIB = 2**20
H100_TOTAL = 81_559 * MIB
HAS_DRIVER = True
try:
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
except pynvml.NVMLError:
    HAS_DRIVER = False


def test_the_real_nvidia_ml_py_reads_gpus_or_says_nvml_is_unavailable() -> None:
    """Runs on every machine: with a driver it reads every GPU; without one (CI, this machine)
    the real pynvml's failure comes out as NvmlUnavailable, not a crash."""
    reader = NvmlReader()
    if not HAS_DRIVER:
        with pytest.raises(NvmlUnavailable, match="NVML Shared Library Not Found"):
            reader.open()
        with pytest.raises(NvmlUnavailable):
            reader.device_count()  # not opened: the same error, not an AttributeError
        reader.close()  # harmless
        return
    reader.open()
    try:
        assert reader.driver_version()
        for index in range(reader.device_count()):
            info = reader.device_info(index)
            assert info.uuid.startswith(("GPU-", "MIG-"))
            reading = reader.read(index)
            assert reading.mem_total_bytes and reading.mem_total_bytes > 0
        reader.xid_events()
    finally:
        reader.close()


class Stub:
    """Attributes of an NVML struct."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def stand_in(
    *, lost: set[int] = frozenset(), unsupported: set[str] = frozenset(), events: list | None = None
) -> types.ModuleType:
    """A module with pynvml's names for the calls NvmlReader makes; errors are pynvml's own."""
    m = types.ModuleType("pynvml_stand_in")
    for name in dir(pynvml):
        if (
            name.startswith("NVMLError")
            or name.startswith("NVML_")
            or name.startswith("nvmlEventType")
        ):
            setattr(m, name, getattr(pynvml, name))
    queue = deque(events or [])
    m.calls = []

    def handle(index: int) -> int:
        if index in lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return index

    def call(name: str, value: Any) -> Any:
        if name in unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    m.nvmlInit = lambda: m.calls.append("init")
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlDeviceGetCount = lambda: 2
    m.nvmlDeviceGetHandleByIndex = handle
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08d}-0000-0000-0000-000000000000"
    m.nvmlDeviceGetName = lambda h: "NVIDIA H100 80GB HBM3"
    m.nvmlDeviceGetPciInfo = lambda h: Stub(busId=f"00000000:{0x18 + h:02X}:00.0".encode())
    m.nvmlDeviceGetUtilizationRates = lambda h: call("util", Stub(gpu=87, memory=41))
    m.nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def memory(h: int, version: int | None = None) -> Stub:
        """An H100 under load as driver 580 answered: v1 counts the driver's
        reserved 479 MiB as used; v2 gives them apart, "used" as nvidia-smi shows it."""
        if version is None:
            return call("memory", Stub(total=H100_TOTAL, used=(21_619 + 479) * MIB,
                                       free=H100_TOTAL - (21_619 + 479) * MIB))
        assert version == pynvml.nvmlMemory_v2
        if "memory_v2" in unsupported:  # a driver before R510
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return call("memory", Stub(version=version, total=H100_TOTAL, reserved=479 * MIB,
                                   used=21_619 * MIB, free=H100_TOTAL - (21_619 + 479) * MIB))

    m.nvmlDeviceGetMemoryInfo = memory
    m.nvmlDeviceGetTemperature = lambda h, sensor: call("temp", 61)
    m.nvmlDeviceGetPowerUsage = lambda h: call("power", 312_456)
    m.nvmlDeviceGetTotalEnergyConsumption = lambda h: call("energy", 987_654_321)

    def ecc(h: int, error_type: int, counter_type: int) -> int:
        assert (error_type, counter_type) == (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        if "ecc_unknown" in unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return call("ecc", 3)

    m.nvmlDeviceGetTotalEccErrors = ecc
    m.nvmlEventSetCreate = lambda: "event-set"
    m.nvmlDeviceRegisterEvents = lambda h, types_, s: m.calls.append(("register", h, types_))
    m.nvmlEventSetFree = lambda s: m.calls.append("free")

    def wait(event_set: str, timeout_ms: int) -> Any:
        assert timeout_ms == 0  # never blocks the sampler
        if not queue:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return queue.popleft()

    m.nvmlEventSetWait = wait
    return m


def test_reads_identity_and_values_in_nvml_units() -> None:
    nvml = stand_in()
    reader = NvmlReader(nvml)
    reader.open()
    assert nvml.calls[:1] == ["init"]
    assert ("register", 0, pynvml.nvmlEventTypeXidCriticalError) in nvml.calls
    assert reader.driver_version() == "550.54.15"
    assert reader.device_count() == 2
    assert reader.device_info(1) == GpuInfo(
        1, "GPU-00000001-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", "00000000:19:00.0"
    )
    reading = reader.read(0)
    assert (reading.gpu_util_pct, reading.mem_util_pct) == (87.0, 41.0)
    assert reading.mem_used_bytes == 21_619 * MIB and reading.mem_total_bytes == H100_TOTAL
    assert reading.mem_reserved_bytes == 479 * MIB
    assert reading.temperature_c == 61.0 and reading.power_mw == 312_456.0
    assert reading.energy_mj == 987_654_321 and reading.ecc_dbe_volatile == 3
    assert reading.errors == {}
    reader.close()
    assert nvml.calls[-2:] == ["free", "shutdown"]


def test_lost_gpu_raises_gpu_lost() -> None:
    reader = NvmlReader(stand_in(lost={1}))
    reader.open()
    reader.read(0)
    with pytest.raises(GpuLost):
        reader.read(1)
    with pytest.raises(GpuLost):
        reader.device_info(1)


def test_unsupported_fields_read_as_none_and_other_failures_are_named() -> None:
    reader = NvmlReader(stand_in(unsupported={"energy", "ecc_unknown"}))
    reader.open()
    reading = reader.read(0)
    assert reading.energy_mj is None  # NOT_SUPPORTED: silently absent
    assert reading.ecc_dbe_volatile is None
    assert list(reading.errors) == ["ecc_dbe"]  # UNKNOWN: absent, and reported
    assert "Unknown Error" in reading.errors["ecc_dbe"]
    assert reading.gpu_util_pct == 87.0


def test_xid_events_drain_without_waiting() -> None:
    events = [
        Stub(device=1, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79),
        Stub(device=0, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=48),
    ]
    reader = NvmlReader(stand_in(events=events))
    reader.open()
    assert reader.xid_events() == [
        XidEvent("GPU-00000001-0000-0000-0000-000000000000", 79),
        XidEvent("GPU-00000000-0000-0000-0000-000000000000", 48),
    ]
    assert reader.xid_events() == []


def test_init_failure_is_unavailable_and_can_be_retried() -> None:
    nvml = stand_in()
    failures = [pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)]

    def init() -> None:
        if failures:
            raise failures.pop()

    nvml.nvmlInit = init
    reader = NvmlReader(nvml)
    with pytest.raises(NvmlUnavailable, match="Driver Not Loaded"):
        reader.open()
    reader.open()
    assert reader.device_count() == 2


def test_other_errors_are_nvml_errors() -> None:
    nvml = stand_in()

    def count() -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    nvml.nvmlDeviceGetCount = count
    reader = NvmlReader(nvml)
    reader.open()  # XID registration cannot count the GPUs: open still succeeds
    with pytest.raises(NvmlError) as raised:
        reader.device_count()
    assert not isinstance(raised.value, NvmlUnavailable | GpuLost)


def test_memory_used_leaves_out_what_the_driver_reserves() -> None:
    """Used and reserved as NVML's v2 memory information separates them, as
    nvidia-smi and dcgm-exporter show them (used 21,619 MiB, not v1's 22,098)."""
    from gpuagent.exporter import dcgm_values

    reader = NvmlReader(stand_in())
    reader.open()
    values = dcgm_values(reader.read(0), last_xid=0)
    assert values["DCGM_FI_DEV_FB_USED"] == 21_619
    assert values["DCGM_FI_DEV_FB_RESERVED"] == 479
    assert values["DCGM_FI_DEV_FB_FREE"] == 81_559 - 21_619 - 479


def test_a_driver_without_v2_memory_information_falls_back_to_v1() -> None:
    from gpuagent.exporter import dcgm_values

    reader = NvmlReader(stand_in(unsupported={"memory_v2"}))
    reader.open()
    reading = reader.read(0)
    assert reading.mem_used_bytes == (21_619 + 479) * MIB  # all v1 knows
    assert reading.mem_reserved_bytes is None and reading.errors == {}
    assert dcgm_values(reading, last_xid=0)["DCGM_FI_DEV_FB_RESERVED"] is None


def test_nvml_reader_reads_compute_processes_and_process_utilisation() -> None:
    nvml = stand_in()
    seen: list[int] = []
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        Stub(pid=4242, usedGpuMemory=3 * 2**30, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0),
        Stub(pid=4343, usedGpuMemory=None, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0),
    ]

    def utilisation(h: int, since: int) -> list[Stub]:
        seen.append(since)
        if since >= 2_000:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)  # no samples since then
        return [Stub(pid=4242, timeStamp=1_500, smUtil=61, memUtil=22, encUtil=0, decUtil=0)]

    nvml.nvmlDeviceGetProcessUtilization = utilisation
    reader = NvmlReader(nvml)
    reader.open()
    assert reader.compute_processes(0) == [
        GpuProcess(4242, 3 * 2**30, None), GpuProcess(4343, None, None)
    ]
    assert reader.process_utilization(0, 1_000) == [ProcessUtilization(4242, 1_500, 61.0, 22.0)]
    assert reader.process_utilization(0, 2_000) == []
    assert seen == [1_000, 2_000]


def test_nvml_reader_says_when_per_process_figures_are_not_supported() -> None:
    nvml = stand_in()

    def unsupported(*args: Any) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    nvml.nvmlDeviceGetComputeRunningProcesses = unsupported
    nvml.nvmlDeviceGetProcessUtilization = unsupported
    reader = NvmlReader(nvml)
    reader.open()
    assert reader.compute_processes(0) is None
    assert reader.process_utilization(0, 0) is None


def test_nvml_reader_enumerates_mig_instances() -> None:
    nvml = stand_in()
    migs = {
        0: Stub(uuid="MIG-1111", gi=7, name="NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
        2: Stub(uuid="MIG-2222", gi=8, name="NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
    }
    nvml.nvmlDeviceGetMigMode = lambda h: [1, 1] if h == 0 else [0, 0]
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7

    def mig_handle(h: int, slot: int) -> Stub:
        if slot not in migs:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return migs[slot]

    nvml.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    uuid_of, name_of = nvml.nvmlDeviceGetUUID, nvml.nvmlDeviceGetName
    nvml.nvmlDeviceGetUUID = lambda h: h.uuid if isinstance(h, Stub) else uuid_of(h)
    nvml.nvmlDeviceGetName = lambda h: h.name if isinstance(h, Stub) else name_of(h)
    nvml.nvmlDeviceGetGpuInstanceId = lambda h: h.gi
    whole = nvml.nvmlDeviceGetMemoryInfo
    nvml.nvmlDeviceGetMemoryInfo = lambda h, *v: (
        Stub(total=9_984 * MIB, used=1_200 * MIB, free=8_784 * MIB) if isinstance(h, Stub)
        else whole(h, *v)
    )
    reader = NvmlReader(nvml)
    reader.open()
    assert reader.mig_devices(0) == [
        MigDevice("MIG-1111", 7, "1g.10gb", 1_200 * MIB, 8_784 * MIB),
        MigDevice("MIG-2222", 8, "1g.10gb", 1_200 * MIB, 8_784 * MIB),
    ]
    assert reader.mig_devices(1) == []  # MIG off
