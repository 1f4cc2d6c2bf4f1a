"""GPU telemetry in the Prometheus text format of NVIDIA's dcgm-exporter.

One series per metric and visible GPU (or MIG instance), with the exporter's labels: gpu,
UUID, pci_bus_id, device, modelName (GPU_I_PROFILE / GPU_I_ID for MIG), Hostname,
DCGM_FI_DRIVER_VERSION, and container / namespace / pod for a device held by a pod.
A lost GPU is not reported at all, as when it falls off the bus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.gpus import Device, Sample, fmt_float, pci_bus_id

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

# name, type, help (dcgm-exporter's default-counters.csv wording)
_METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
)


# The agent's per-pod families for a time-sliced GPU (gpuagent/README.md): the same names, HELP
# texts and labels, so the portal reads kubesim's shared node as it reads the agent's. kubesim
# knows each pod's own trace, so its figures are always scope="process".
_POD_METRICS: tuple[tuple[str, str], ...] = (
    ("gpuagent_pod_gpu_util",
     "GPU utilization of a pod on a shared GPU (in %): its own processes' with "
     'scope="process", the whole GPU\'s (every pod on it) with scope="device".'),
    ("gpuagent_pod_mem_copy_util",
     "Memory utilization of a pod on a shared GPU (in %), scoped as gpuagent_pod_gpu_util."),
    ("gpuagent_pod_fb_used",
     "Framebuffer memory used by a pod on a shared GPU (in MiB), scoped as "
     "gpuagent_pod_gpu_util."),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def device_labels(device: Device) -> str:
    labels: list[tuple[str, str]] = [
        ("gpu", str(device.index)),
        ("UUID", device.uuid),
        ("pci_bus_id", pci_bus_id(device.index)),
        ("device", f"nvidia{device.index}"),
        ("modelName", device.model.model_name),
    ]
    if device.mig_profile is not None:
        labels += [("GPU_I_PROFILE", device.mig_profile), ("GPU_I_ID", str(device.mig_instance))]
    labels += [("Hostname", device.node), ("DCGM_FI_DRIVER_VERSION", device.driver_version)]
    if device.holder is not None:
        labels += [("container", device.holder.container), ("namespace", device.holder.namespace),
                   ("pod", device.holder.pod)]
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels)


def _reserved_mib(device: Device) -> int:
    """The driver's own share of a GPU's memory, neither used nor free (NVML's v2 memory
    information; dcgm-exporter's FB_RESERVED): about 0.6 %, as an H100 on driver 580."""
    return device.memory_mib // 170


def _values(device: Device, sample: Sample) -> dict[str, float]:
    return {
        "DCGM_FI_DEV_GPU_TEMP": sample.temp_c,
        "DCGM_FI_DEV_POWER_USAGE": sample.power_w,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": int(device.energy_mj),
        "DCGM_FI_DEV_GPU_UTIL": sample.util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": sample.mem_copy_util,
        "DCGM_FI_DEV_XID_ERRORS": device.xid,
        "DCGM_FI_DEV_FB_FREE": max(0, device.memory_mib - _reserved_mib(device)
                                   - sample.fb_used_mib),
        "DCGM_FI_DEV_FB_USED": sample.fb_used_mib,
        "DCGM_FI_DEV_FB_RESERVED": _reserved_mib(device),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": device.ecc_dbe,
    }


class GpuMetrics:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def changed(self) -> None:
        """A device changed hands; samples are computed on the next scrape."""

    def visible_devices(self) -> list[Device]:
        """The devices with a series each: every GPU or MIG instance; of a time-sliced GPU,
        each replica a pod holds, or its first replica while none is held (one series per GPU
        and pod, as the NVML agent writes a shared GPU, and dcgm-exporter with
        --kubernetes-virtual-gpus less its `vgpu` label)."""
        devices: list[Device] = []
        for node in sorted(self.cluster.gpus.by_node):
            shown: set[str] = set()
            node_devices = [d for d in self.cluster.gpus.by_node[node] if not d.lost]
            held = {d.uuid for d in node_devices if d.replica is not None and d.holder}
            for device in node_devices:
                if device.replica is None:
                    devices.append(device)
                elif device.holder is not None or (device.uuid not in held
                                                   and device.uuid not in shown):
                    devices.append(device)
                    shown.add(device.uuid)
        return devices

    def render(self) -> str:
        now = self.cluster.now()
        visible = self.visible_devices()
        samples = [self.cluster.gpus.advance(device, now) for device in visible]
        # A time-sliced GPU's replicas held by pods: its device figures are their sum (what
        # NVML reads of the whole GPU), written once per pod as the agent does; each pod's own
        # figures go to the per-pod families.
        shared: dict[str, list[Sample]] = {}
        for device, sample in zip(visible, samples, strict=True):
            if device.replica is not None and device.holder is not None:
                shared.setdefault(device.uuid, []).append(sample)
        rows = []
        pod_rows = []
        for device, sample in zip(visible, samples, strict=True):
            values = _values(device, sample)
            if device.uuid in shared and device.replica is not None:
                together = shared[device.uuid]
                used = min(sum(s.fb_used_mib for s in together),
                           device.memory_mib - _reserved_mib(device))
                values |= {
                    "DCGM_FI_DEV_GPU_UTIL": min(100.0, round(sum(s.util for s in together), 1)),
                    "DCGM_FI_DEV_MEM_COPY_UTIL": min(
                        100.0, round(sum(s.mem_copy_util for s in together), 1)),
                    "DCGM_FI_DEV_FB_USED": used,
                    "DCGM_FI_DEV_FB_FREE": device.memory_mib - _reserved_mib(device) - used,
                }
                pod_rows.append((device_labels(device) + ',scope="process"',
                                 (sample.util, sample.mem_copy_util, sample.fb_used_mib)))
            rows.append((device_labels(device), values))
        out: list[str] = []
        for name, kind, help_text in _METRICS:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for labels, dcgm in rows:
                out.append(f"{name}{{{labels}}} {fmt_float(dcgm[name])}")
        for position, (name, help_text) in enumerate(_POD_METRICS):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} gauge")
            for labels, own in pod_rows:
                out.append(f"{name}{{{labels}}} {fmt_float(own[position])}")
        return "\n".join(out) + "\n"
