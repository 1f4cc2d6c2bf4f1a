#!/usr/bin/env python
"""The real control plane's start-up: cold and warm starts, and the build cache's no-op run.

    .venv/bin/python bench/controlplane_bench.py [--repeats 3] [--no-addons] [--json out.json]

1. **Starts.** Each repetition starts a `ControlPlane` (stack/k8s/cluster.py) with the addons the
   tests and the demo run (`stack.k8s.addons.default_addons`: MetalLB's controller, one GPU agent
   and pod-resources socket per GPU node, k8s-keystone-auth) in a fresh temporary folder — the
   **cold** start: the CA and every certificate and key are made, etcd starts on an empty data
   directory, kube-apiserver until /readyz answers, controller-manager, scheduler and KWOK, the
   inventory's Nodes, the portal's ServiceAccount and its token, the addons, then every Node
   Ready — and stops it; then starts it again in the same folder — the **warm** start: the
   certificates are there, etcd starts empty again (its data lives in /dev/shm and goes with the
   stop). Wall time of `start()`, of each phase (the control plane's own methods, timed where
   they run), of `stop()`, the time from `start()` returning to the portal's first answered
   request as its ServiceAccount (`list nodes`) and to a new Job's pod Running (what start()
   does not wait for: the controller-manager and the scheduler at work); the RSS of each
   process after the start.
   k8s-keystone-auth is pointed at a port where no Keystone listens: its start does not ask
   Keystone anything (only a token review would), so it costs what it costs with one.
2. **The build, cached.** `python -m stack.k8s.build` (every component) run as a subprocess a
   few times, and `build.build(component)` of each component in process: with everything
   cached this only hashes each wrapper module's files and checks the binaries exist. The check
   that nothing was built: no "building …" line, and each component's cache folder unchanged
   (same inode and mtime of its `built.txt`). A cold Go build is not timed here.

The binaries must be built already (`python -m stack.k8s.build`); the benchmark stops if a
component is missing rather than time a Go build.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def describe(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# --- one start ----------------------------------------------------------------------------

class Phases:
    """Wall time of the control plane's steps, taken by wrapping its methods on the instance
    (and `build.ensure`, which `_prepare` calls first): start() runs unchanged."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, owner, attribute: str, label: str) -> None:
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - began

        setattr(owner, attribute, timed)


PHASES = [  # (method of ControlPlane, label), in the order start() runs them
    ("_prepare", "certificates, keys and kubeconfigs"),
    ("start_etcd", "etcd (until /health)"),
    ("start_apiserver", "kube-apiserver (until /readyz)"),
    ("start_controllers", "controller-manager and scheduler (spawned)"),
    ("start_kwok", "KWOK (spawned)"),
    ("_nodes", "the inventory's Nodes created"),
    ("_portal_identity", "portal ServiceAccount, RBAC, token"),
    ("wait_nodes_ready", "every Node Ready"),
]


def one_start(workdir: Path, *, addons: bool, keystone_url: str) -> dict:
    from kubernetes import client

    from stack.k8s import build
    from stack.k8s.addons import default_addons
    from stack.k8s.cluster import ControlPlane

    chosen = default_addons(keystone_url=keystone_url) if addons else []
    cp = ControlPlane(workdir, addons=chosen)
    phases = Phases()
    for method, label in PHASES:
        phases.wrap(cp, method, label)
    for addon in chosen:
        phases.wrap(addon, "start", f"addon {addon.name}")
        if hasattr(addon, "_crds"):  # MetalLB: most of its start is its CRDs being established
            phases.wrap(addon, "_crds", f"addon {addon.name}: of which its CRDs Established")
    original_ensure = build.ensure
    build.ensure = _timed_ensure(original_ensure, phases)
    began = time.perf_counter()
    try:
        cp.start()
        started = time.perf_counter() - began
        # the portal's first request as its own identity, right after start() returns
        first_began = time.perf_counter()
        deadline = time.monotonic() + 30
        while True:
            try:
                with cp.api_client(cp.portal_kubeconfig) as api:
                    nodes = client.CoreV1Api(api).list_node(_request_timeout=5).items
                break
            except Exception:  # noqa: BLE001 - 401/403 until RBAC is in: keep asking
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        first_request = time.perf_counter() - first_began
        first_job = first_job_running(cp)
        first_pod = first_job["Running"] + first_request
        memory = {name: rss_mib(proc.pid) for name, proc in cp.procs.items()}
        for addon in chosen:
            for name, proc in _addon_procs(addon):
                memory[name] = rss_mib(proc.pid)
    finally:
        build.ensure = original_ensure
        stop_began = time.perf_counter()
        cp.stop()
        stopped = time.perf_counter() - stop_began
    seconds = dict(phases.seconds)
    # _prepare includes the binaries' cache check: show the certificates on their own
    seconds["certificates, keys and kubeconfigs"] -= seconds.get("binaries (cache check)", 0.0)
    seconds["(the rest: admin kubeconfig, start() itself)"] = started - sum(
        v for k, v in seconds.items() if "of which" not in k)
    return {"start_s": started, "started_in": cp.started_in, "phases": seconds,
            "first_portal_request_s": first_request, "first_pod_running_s": first_pod,
            "first_job_steps_s": first_job,
            "nodes": len(nodes), "stop_s": stopped,
            "rss_mib": memory}


def first_job_running(cp) -> dict[str, float]:
    """When a Job created now (admin, in a new namespace, its pods running as a ServiceAccount
    created with it, as the portal's are) has its pod created (the controller-manager's Job
    controller), bound (the scheduler) and Running (KWOK: pod_start_seconds, twice); and when
    the namespace's `default` ServiceAccount appears (the controller-manager's ServiceAccount
    controller). Seconds from the Job's create."""
    from kubernetes import client

    began = time.perf_counter()
    with cp.api_client() as api:
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": "bench-first-job"}})
        core.create_namespaced_service_account("bench-first-job", {"metadata": {"name": "runner"}})
        batch.create_namespaced_job("bench-first-job", {
            "metadata": {"name": "first"},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "serviceAccountName": "runner",
                "containers": [{"name": "main", "image": "busybox:1.36",
                                "command": ["sleep", "60"]}]}}}})
        # when each step was first seen (polled every 50 ms), seconds from the Job's create
        seen: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while True:
            now = time.perf_counter() - began
            if "default ServiceAccount" not in seen and core.list_namespaced_service_account(
                    "bench-first-job", field_selector="metadata.name=default").items:
                seen["default ServiceAccount"] = now
            pods = core.list_namespaced_pod("bench-first-job",
                                            label_selector="job-name=first").items
            if pods:
                seen.setdefault("pod created", now)
            if any(p.spec.node_name for p in pods):
                seen.setdefault("pod bound", now)
            if any(p.status.phase == "Running" for p in pods):
                seen.setdefault("Running", now)
            if "Running" in seen and "default ServiceAccount" in seen:
                return seen
            if time.monotonic() > deadline:
                raise RuntimeError("the first Job's pod was not Running within 60 s")
            time.sleep(0.05)


def _timed_ensure(original, phases: Phases):
    @functools.wraps(original)
    def ensure(*names, **kwargs):
        missing = [n for n in names if not _built(n)]
        if missing:
            raise SystemExit(f"component(s) {', '.join(missing)} not built: run "
                             "`python -m stack.k8s.build` first (a cold build is not timed here)")
        began = time.perf_counter()
        try:
            return original(*names, **kwargs)
        finally:
            phases.seconds["binaries (cache check)"] = time.perf_counter() - began

    return ensure


def _built(name: str) -> bool:
    from stack.k8s import build

    return build.COMPONENTS[name].built()


def _addon_procs(addon) -> list[tuple[str, subprocess.Popen]]:
    procs = []
    if getattr(addon, "proc", None) is not None:
        procs.append((addon.name, addon.proc))
    for node, agent in (getattr(addon, "agents", None) or {}).items():
        procs.append((f"gpuagent {node}", agent))
    return procs


def starts(repeats: int, *, addons: bool) -> dict:
    from stack.procs import free_port

    keystone_url = f"http://127.0.0.1:{free_port()}/v3"  # nothing listens: see the docstring
    cold, warm = [], []
    for index in range(repeats):
        workdir = Path(tempfile.mkdtemp(prefix="gpu-portal-cp-bench-"))
        try:
            for label, runs in (("cold", cold), ("warm", warm)):
                result = one_start(workdir, addons=addons, keystone_url=keystone_url)
                runs.append(result)
                print(f"[{index + 1}/{repeats}] {label} start {result['start_s']:.2f} s, "
                      f"first portal request +{result['first_portal_request_s'] * 1000:.0f} ms, "
                      f"first Job's pod Running +{result['first_pod_running_s']:.2f} s, "
                      f"stop {result['stop_s']:.2f} s; load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"cold": summarise(cold), "warm": summarise(warm), "runs": {"cold": cold,
                                                                        "warm": warm}}


def summarise(runs: list[dict]) -> dict:
    labels = list(runs[0]["phases"])
    return {
        "start_s": describe([r["start_s"] for r in runs]),
        "first_portal_request_s": describe([r["first_portal_request_s"] for r in runs]),
        "first_pod_running_s": describe([r["first_pod_running_s"] for r in runs]),
        "first_job_steps_s": {step: describe([r["first_job_steps_s"][step] for r in runs
                                              if step in r["first_job_steps_s"]])
                              for step in runs[0]["first_job_steps_s"]},
        "stop_s": describe([r["stop_s"] for r in runs]),
        "phases": {label: describe([r["phases"].get(label, 0.0) for r in runs])
                   for label in labels},
        "rss_mib": {name: statistics.median(r["rss_mib"][name] or 0.0 for r in runs)
                    for name in runs[-1]["rss_mib"]},
    }


# --- the build cache ----------------------------------------------------------------------

def cache_marks() -> dict[str, tuple[int, int]]:
    from stack.k8s import build

    marks = {}
    for name, component in build.COMPONENTS.items():
        built = component.bin_dir.parent / "built.txt"
        info = built.stat()
        marks[name] = (info.st_ino, info.st_mtime_ns)
    return marks


def build_cache(repeats: int) -> dict:
    from stack.k8s import build

    missing = [name for name, c in build.COMPONENTS.items() if not c.built()]
    if missing:
        raise SystemExit(f"component(s) {', '.join(missing)} not built: run "
                         "`python -m stack.k8s.build` first (a cold build is not timed here)")
    before = cache_marks()
    command = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "stack.k8s.build"], cwd=REPO,
                                capture_output=True, text=True, timeout=120)
        command.append(time.perf_counter() - began)
        if result.returncode != 0 or "building" in result.stderr:
            raise SystemExit(f"python -m stack.k8s.build built or failed:\n{result.stderr}")
    # the interpreter's own start, to set the command's time against
    bare = []
    for _ in range(repeats):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import stack.procs"], cwd=REPO, check=True)
        bare.append(time.perf_counter() - began)
    per_component = {}
    for name, component in build.COMPONENTS.items():
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            build.build(component, quiet=True)
            times.append(time.perf_counter() - began)
        per_component[name] = describe(times) | {"binaries": len(component.binaries)}
    after = cache_marks()
    if after != before:
        raise SystemExit(f"the build cache changed: {before} → {after}")
    return {"command_s": describe(command), "python_start_s": describe(bare),
            "components": per_component, "unchanged": True}


# --- report -------------------------------------------------------------------------------

def report(figures: dict) -> None:
    s = figures.get("starts")
    if s:
        n = s["cold"]["start_s"]["n"]
        print(f"\n| control plane ({'with' if figures['meta']['addons'] else 'without'} addons, "
              f"n={n} each) | cold median | min | max | warm median | min | max |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")

        def row(label: str, cold: dict, warm: dict, scale: float = 1.0, unit: str = "s") -> None:
            fmt = (lambda v: f"{v * scale:.0f}") if unit == "ms" else (lambda v: f"{v:.2f}")
            print(f"| {label} ({unit}) | {fmt(cold['median'])} | {fmt(cold['min'])} | "
                  f"{fmt(cold['max'])} | {fmt(warm['median'])} | {fmt(warm['min'])} | "
                  f"{fmt(warm['max'])} |")

        row("**start()**", s["cold"]["start_s"], s["warm"]["start_s"])
        for label in s["cold"]["phases"]:
            row(f"  {label}", s["cold"]["phases"][label],
                s["warm"]["phases"].get(label, s["cold"]["phases"][label]))
        row("start() returned → portal's first request answered", s["cold"][
            "first_portal_request_s"], s["warm"]["first_portal_request_s"], 1000, "ms")
        row("start() returned → a new Job's pod Running", s["cold"]["first_pod_running_s"],
            s["warm"]["first_pod_running_s"])
        for step in s["cold"]["first_job_steps_s"]:
            if step in s["warm"]["first_job_steps_s"]:
                row(f"  the Job created → {step}", s["cold"]["first_job_steps_s"][step],
                    s["warm"]["first_job_steps_s"][step])
        row("stop()", s["cold"]["stop_s"], s["warm"]["stop_s"])
        print("\nRSS after start (MiB, median): " + ", ".join(
            f"{name} {mib:.0f}" for name, mib in s["warm"]["rss_mib"].items()))
    b = figures.get("build")
    if b:
        print(f"\n`python -m stack.k8s.build`, everything cached: median "
              f"{b['command_s']['median'] * 1000:.0f} ms (min {b['command_s']['min'] * 1000:.0f},"
              f" max {b['command_s']['max'] * 1000:.0f}; the interpreter alone "
              f"{b['python_start_s']['median'] * 1000:.0f} ms); cache folders unchanged")
        print("\n| component | binaries | build() with the cache, median ms | max ms |")
        print("| --- | ---: | ---: | ---: |")
        for name, d in b["components"].items():
            print(f"| {name} | {d['binaries']} | {d['median'] * 1000:.2f} | "
                  f"{d['max'] * 1000:.2f} |")
    meta = figures["meta"]
    print(f"\n{meta['nproc']} CPUs; load average {meta['loadavg_before']} before, "
          f"{meta['loadavg_after']} after; {meta['date']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="cold + warm starts (and build runs) each")
    parser.add_argument("--no-addons", action="store_true",
                        help="the control plane alone (no MetalLB, GPU agents, keystone-auth)")
    parser.add_argument("--only", choices=("starts", "build"), help="one half only")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    meta = {"repeats": args.repeats, "addons": not args.no_addons, "nproc": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "loadavg_before": [round(v, 2) for v in os.getloadavg()]}
    figures: dict = {"meta": meta}
    if args.only in (None, "build"):
        figures["build"] = build_cache(max(args.repeats, 3))
    if args.only in (None, "starts"):
        figures["starts"] = starts(args.repeats, addons=not args.no_addons)
    meta["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
