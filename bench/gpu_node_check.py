"""The GPU agent against a real NVIDIA driver: what only a node with a GPU can show.

    PYTHONPATH=. python3 bench/gpu_node_check.py --out DIR

Run on a machine with an NVIDIA GPU, its driver, nvidia-ml-py, prometheus-client and PyTorch
(the agent's image has the first two; PyTorch only makes the load). It

1. opens `NvmlReader` (gpuagent/nvml.py) on the real libnvidia-ml and reads what the sampler
   reads of GPU 0: identity, utilisation, memory (v2: used, free, reserved apart), temperature,
   power, energy, ECC, MIG mode and instances, the compute processes;
2. starts two processes on GPU 0 as two pods sharing it by time-slicing would: `busy` keeps
   bf16 matrix products running and holds 8 GiB, `idle` holds 2 GiB and runs nothing;
3. asks NVML for the busy process's new samples every 20 ms: the driver's per-process sample
   period (cycles closer than it find no new sample);
4. samples with the agent's `Sampler` in the `Exporter`'s thread, as on a node, the GPU held by
   both as time-sliced replicas and their PIDs attributed to the two pods (the static mappings
   stand in for the kubelet and /proc), and checks that each pod's figures are its own
   (`scope="process"`): busy's SM use high, idle's nil, each one's memory what it allocated;
5. scrapes the agent's `/metrics` once and keeps it.

What it read goes to DIR/gpu_node_check.json and DIR/metrics.txt; it exits 1 when a check
fails, after writing both. bench/results/gpu_node.md holds its recorded results.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from gpuagent.exporter import Exporter
from gpuagent.nvml import NvmlReader
from gpuagent.podresources import Holder, StaticPodMapping
from gpuagent.processes import StaticProcessMapping
from gpuagent.sampler import Sampler

GIB = 1024**3
NAMESPACE = "vision-lab"

# a pod's process: allocate `gib` on GPU 0, say so, then (busy) multiply until stdin closes
LOAD = """
import sys, threading, torch
gib, busy = float(sys.argv[1]), sys.argv[2] == "busy"
held = torch.empty(int(gib * 1024**3), dtype=torch.uint8, device="cuda:0")
a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16) if busy else None
torch.cuda.synchronize()
print("ready", flush=True)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    if busy:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
    else:
        done.wait(0.5)
"""


def start_pod(role: str, gib: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", LOAD, str(gib), role], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"the {role} process did not start: {line!r}, rc {proc.poll()}")
    return proc


def smi(*args: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi: {exc}"


def sample_period(reader: NvmlReader, pid: int, seconds: float = 4.0) -> dict[str, Any]:
    """How often the driver makes a new per-process utilisation sample of a busy process:
    asked every 20 ms for the samples newer than the newest seen, the gaps between the new
    samples' timestamps (and how many asks found none)."""
    since, stamps, empty = 0, [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        new = [s for s in reader.process_utilization(0, since) or [] if s.pid == pid]
        if new:
            since = max(s.timestamp_us for s in new)
            stamps.append(since)
        else:
            empty += 1
        time.sleep(0.02)
    gaps = sorted((b - a) / 1e6 for a, b in zip(stamps[1:], stamps[2:], strict=False))
    return {"new_samples": len(stamps), "asks_without_one": empty,
            "gap_s": {"min": gaps[0], "median": gaps[len(gaps) // 2], "max": gaps[-1]}
            if gaps else None}


def plain(value: Any) -> Any:
    """A reading (a dataclass, or a list or tuple of them) as JSON's types: asdict converts what
    a dataclass nests, so only the top level needs a look."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=12.0, help="sampling time with load")
    parser.add_argument("--interval", type=float, default=1.0, help="the agent's interval")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"checks": {}}
    checks = found["checks"]

    reader = NvmlReader()
    reader.open()
    info = reader.device_info(0)
    found.update(driver=reader.driver_version(), count=reader.device_count(), info=plain(info),
                 idle_reading=plain(reader.read(0)), mig=plain(reader.mig_devices(0)),
                 processes_before=plain(reader.compute_processes(0)))

    pods = {"busy": start_pod("busy", 8), "idle": start_pod("idle", 2)}
    pids = {role: proc.pid for role, proc in pods.items()}
    found["pids"] = pids
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = {p.pid for p in reader.compute_processes(0) or []}
            if set(pids.values()) <= seen:
                break
            time.sleep(0.5)
        found["processes_under_load"] = plain(reader.compute_processes(0))
        found["process_utilization"] = plain(reader.process_utilization(0, 0))
        found["loaded_reading"] = plain(reader.read(0))
        # the driver's own tool, beside the agent's reading of the same moment
        found["nvidia_smi"] = {name: smi(*cmd) for name, cmd in (
            ("compute_apps", ("--query-compute-apps=pid,used_memory", "--format=csv,noheader")),
            ("pmon", ("pmon", "-c", "1", "-s", "um")))}

        found["sample_period_s"] = sample_period(reader, pids["busy"])

        holders = {role: Holder(NAMESPACE, f"notebook-{role}", "main", shared=True)
                   for role in pids}
        sampler = Sampler(
            reader=reader, hostname="gpu-node-check", interval=args.interval,
            mapper=StaticPodMapping({info.uuid: tuple(holders.values())}),
            processes=StaticProcessMapping({pid: (NAMESPACE, holders[role].pod)
                                            for role, pid in pids.items()}))
        # as on a node: the exporter's sampling thread, every `interval` seconds from its start
        exporter = Exporter(sampler, host="127.0.0.1", port=0)
        exporter.start()
        cycles: list[dict[str, Any]] = []
        try:
            end = time.monotonic() + args.seconds
            counted = 1  # the first cycle takes every sample since 0: not one of a period
            while time.monotonic() < end:
                time.sleep(0.05)
                if sampler.counters.cycles <= counted:
                    continue
                counted = sampler.counters.cycles
                (gpu,) = [g for g in sampler.snapshot.gpus if g.info.uuid == info.uuid]
                cycles.append({"gpu_util": gpu.reading.gpu_util_pct,
                               "pods": {u.holder.pod: plain(u) for u in gpu.pods}})
            with urllib.request.urlopen(f"{exporter.url}/metrics", timeout=10) as answer:
                metrics = answer.read().decode()
        finally:
            exporter.stop()
        found["cycles"] = cycles
        (args.out / "metrics.txt").write_text(metrics)
    finally:
        for proc in pods.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(30)
        reader.close()

    def mean(role: str, key: str) -> float:
        values = [c["pods"][f"notebook-{role}"][key] for c in cycles
                  if c["pods"].get(f"notebook-{role}", {}).get(key) is not None]
        return sum(values) / len(values) if values else float("nan")

    scopes = {u["scope"] for c in cycles for u in c["pods"].values()}
    by_pid = {p["pid"]: p["used_memory_bytes"] for p in found["processes_under_load"] or []}
    found["means"] = {role: {"gpu_util_pct": mean(role, "gpu_util_pct"),
                             "fb_used_gib": mean(role, "fb_used_bytes") / GIB}
                      for role in pids}
    checks["nvml_reads_utilisation_memory_power"] = all(
        found["idle_reading"][k] is not None
        for k in ("gpu_util_pct", "mem_used_bytes", "mem_total_bytes", "power_mw"))
    checks["both_processes_listed_with_their_pids"] = set(pids.values()) <= set(by_pid)
    checks["per_pod_figures_are_the_processes_own"] = scopes == {"process"}
    checks["busy_pod_uses_the_sms"] = found["means"]["busy"]["gpu_util_pct"] >= 50
    checks["idle_pod_reads_nil"] = found["means"]["idle"]["gpu_util_pct"] <= 5
    checks["memory_per_pod_is_what_it_allocated"] = (
        8 <= found["means"]["busy"]["fb_used_gib"] <= 9.5
        and 2 <= found["means"]["idle"]["fb_used_gib"] <= 3.5)
    checks["metrics_name_both_pods"] = all(
        f'pod="notebook-{role}"' in metrics for role in pids)
    busy_line = [line for line in metrics.splitlines() if line.startswith(
        "gpuagent_pod_gpu_util{") and 'pod="notebook-busy"' in line]
    found["metrics_busy_util"] = busy_line
    checks["metrics_show_the_busy_pod_busy"] = bool(busy_line) and all(
        float(line.rsplit(" ", 1)[1]) >= 50 for line in busy_line)
    (args.out / "gpu_node_check.json").write_text(json.dumps(found, indent=1, default=str))
    print(json.dumps({"driver": found["driver"], "gpu": info.name, "interval": args.interval,
                      "sample_period_s": found["sample_period_s"], "means": found["means"],
                      "busy_by_cycle": [c["pods"]["notebook-busy"]["gpu_util_pct"]
                                        for c in cycles],
                      "scopes": sorted(scopes), "checks": checks}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    raise SystemExit(main())
