#!/usr/bin/env python
"""`make bench`: the quick version of every benchmark, one after the other, then a summary.

    .venv/bin/python bench/run.py [--only kubesim,load] [--list]

Each benchmark starts what it needs on loopback and stops it at the end; the quick versions
take smaller sizes than the recorded runs (bench/README.md has the full commands and figures),
so their figures are a smoke check of the benchmark and a rough reading, not the record. The
kubesim ones took 6–7 minutes on two cores; the three on the real control plane (controlplane,
tracking_kube, launch_kube) add about 3½ and need its binaries built (`python -m stack.k8s.build`):
without them they are "not run" and the run fails. Each benchmark's full output is kept in
.demo/bench/<name>.log (and <name>.json where it writes JSON). The exit status is 0 when every
benchmark ran to the end with status 0.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / ".demo" / "bench"


def _json_in(text: str) -> dict:
    """The last top-level JSON object a benchmark printed."""
    start = text.rfind("\n{")
    return json.loads(text[start + 1 if start >= 0 else text.index("{"):])


def _lines(*patterns: str) -> Callable[[str, dict | None], str]:
    def pick(text: str, _figures: dict | None) -> str:
        return " | ".join(line.strip() for line in text.splitlines()
                          if any(re.search(p, line) for p in patterns))
    return pick


def kubesim_figures(text: str, _figures: dict | None) -> str:
    f = _json_in(text)
    return (f"watch {f['watch']['events_per_s']:,.0f} events/s; list of "
            f"{f['pods']:,} pods p95 {f['list_all']['p95_ms']} ms; RSS {f['rss_mb']} MB"
            if "events_per_s" in f.get("watch", {}) else json.dumps(f)[:300])


def tracking_figures(text: str, _figures: dict | None) -> str:
    cycles = [f"{m[0]} workloads: {m[1]} + {m[3]} requests (relist {m[2]} s)" for m in re.findall(
        r"(\d+) workloads: fresh cycle (\d+) requests \(relist ([0-9.]+) s.*?resumed cycle "
        r"(\d+) requests", text)]
    lag = re.search(r"^lag \(s\): (.*)$", text, re.M)
    out = "fresh + resumed cycle: " + ", ".join(cycles)
    if lag:
        everything = ast.literal_eval(lag.group(1))["all"]
        out += (f"; lag p50 {everything['p50'] * 1000:.0f} ms, p95 "
                f"{everything['p95'] * 1000:.0f} ms (n={everything['n']})")
    return out


def controlplane_figures(_text: str, f: dict | None) -> str:
    s, b = f["starts"], f["build"]
    return (f"start cold {s['cold']['start_s']['median']:.1f} s, warm "
            f"{s['warm']['start_s']['median']:.1f} s; a new Job's pod Running "
            f"+{s['warm']['first_pod_running_s']['median']:.1f} s after; stop "
            f"{s['warm']['stop_s']['median']:.1f} s; `python -m stack.k8s.build` cached "
            f"{b['command_s']['median'] * 1000:.0f} ms")


def queueing_figures(_text: str, f: dict | None) -> str:
    order, eta = f["order_inversions"], f["eta_median_abs_error_seconds"]
    alone = f["kueue_alone"] or {}
    return (f"{f['launches']} launches, {f['tenants']} tenants: drained in "
            f"{f['portal']['drain_seconds']} s, Kueue alone {alone.get('drain_seconds')} s "
            f"(ratio {f['ratio_portal_to_kueue_alone']}; ideal {f['ideal_seconds']} s); order inversions {order['inverted_launched_1s_apart']}"
            f" (≥ 1 s apart); portal {f['portal_cpu_ms_per_workload']} ms CPU/workload; ETA "
            f"median error {eta} s, coverage {f['eta_coverage']:.0%}")


def distributed_figures(_text: str, f: dict | None) -> str:
    portal, alone = f["portal"], f["kueue_alone"]
    return (f"{f['jobs']} groups of {f['group']}, {f['tenants']} tenants: launch → all ranks "
            f"running p50 {portal['launch_to_all_ranks_running_seconds']['p50']} s, Kueue alone "
            f"{alone['launch_to_all_ranks_running_seconds']['p50']} s (ratio "
            f"{f['ratio_p50_portal_to_kueue_alone']}); drain ratio "
            f"{f['ratio_drain_portal_to_kueue_alone']}; partial starts "
            f"{portal['partial_starts']} / {alone['partial_starts']}")


def usage_figures(text: str, _figures: dict | None) -> str:
    ingest = re.search(r"^ingest \(samples/s\): (.*)$", text, re.M)
    rates = ast.literal_eval(ingest.group(1)) if ingest else {}
    reports = [float(v) for v in re.findall(r'group_by=\w+": ([0-9.]+)', text)]
    rss = re.findall(r"cycle (\d+): RSS ([0-9.]+) MiB", text)
    return (f"ingest {rates.get('copy, batches of 10000', 0):,}/s (COPY, 10k batches); "
            f"report ≤ {max(reports, default=0):.1f} ms; scrape RSS "
            + " → ".join(f"{mib} MiB (cycle {n})" for n, mib in rss[:1] + rss[-1:]))


def capacity_figures(text: str, _figures: dict | None) -> str:
    f = _json_in(text)
    ratio, calls = f["p50_ratio"], f["cluster_calls_per_request"]
    small, large = f["sizes"]
    return (f"p50 ratio {large:,}/{small:,} pods: " + ", ".join(
        f"{name} {value}×" for name, value in ratio.items()) + "; cluster calls per warm "
            f"request: {max(calls.values())}")


def launch_figures(_text: str, f: dict | None) -> str:
    return (f"portal p50 {f['portal_total']['p50'] * 1000:.1f} ms, raw p50 "
            f"{f['raw_total']['p50'] * 1000:.1f} ms, ratio {f['ratio_p50']:.1f}×")


def api_auth_figures(_text: str, f: dict | None) -> str:
    return (f"token p50 {f['token']['p50']:.1f} ms, session p50 {f['session']['p50']:.1f} ms, "
            f"cache miss p50 {f['token_cache_miss']['p50']:.0f} ms, hit rate "
            f"{f['cache_steady']['hit_rate']:.0%}")


def notifications_figures(_text: str, f: dict | None) -> str:
    return (f"notify() {f['notify_per_second']}/s (p95 {f['notify_ms']['p95']} ms), dispatch "
            f"{f['dispatch_per_second']}/s, end to end {f['end_to_end_per_second']}/s")


def budget_figures(_text: str, f: dict | None) -> str:
    def added(key: str) -> str:
        return (f"{f[key]['p50_ms'] - f['lock_only']['p50_ms']:.1f} / "
                f"{f[key]['p95_ms'] - f['lock_only']['p95_ms']:.1f} ms")
    return (f"budget check adds p50/p95 {added('budget_check')} (with a user cap "
            f"{added('budget_check_with_user_cap')}; unsettled {added('budget_check_unsettled')}"
            f"; quota check {added('quota_check')}) at {f['workloads_in_period']:,} workloads")


def calendar_figures(_text: str, f: dict | None) -> str:
    g = f["goal"]
    return (f"{f['reservations']} reservations, {f['windows']} windows: the calendar adds p95 "
            f"{g['admission_added_p95_ms_worst']} ms to a launch (admission) + "
            f"{g['calendar_advisors_p95_ms_worst']} ms to its check (advisors) = "
            f"{g['calendar_added_p95_ms']} ms (goal ≤ {g['goal_ms']}: "
            f"{'met' if g['met'] else 'not met'}); weekly booking over a year p95 "
            f"{f['booking_weekly_year_admin']['p95_ms']:.0f} ms; calendar 14 d p95 "
            f"{f['calendar_data_14d']['p95_ms']:.1f} ms; queue blocks p95 "
            f"{f['queue_blocks']['p95_ms']:.1f} ms")


def ssh_figures(_text: str, f: dict | None) -> str:
    s, up, down = f["setup_s"], f["upload_mb_s"], f["download_mb_s"]
    return (f"set-up p50 proxy {s['proxy']['p50'] * 1000:.0f} ms vs direct "
            f"{s['direct']['p50'] * 1000:.0f} ms; scp {f['size_mb']} MB up {up['proxy']:.1f} vs "
            f"{up['direct']:.1f} MB/s ({up['ratio']:.2f}), down {down['proxy']:.1f} vs "
            f"{down['direct']:.1f} MB/s ({down['ratio']:.2f}); goal ≥ "
            f"{f['goal']['throughput_ratio_min']}: {'met' if f['goal']['met'] else 'not met'}")


def load_figures(_text: str, f: dict | None) -> str:
    total = f["endpoints"][-1]
    out = (f"{f['steady']['signed_in']} users: {total['rps']:.1f} req/s, p50/p95/p99 "
           f"{total['p50_ms']:.0f}/{total['p95_ms']:.0f}/{total['p99_ms']:.0f} ms, "
           f"{total['errors']} errors of {total['count']}")
    if "burst" in f:
        b = f["burst"]
        out += (f"; burst: {b['admitted']} admitted, {sum(b['refused'].values())} refused, "
                f"{b['failed']} failed, quota violations {len(b['quota']['violations'])}, "
                f"not settled {len(b['settle']['not_settled'])}")
    return out


def demo_burst_figures(_text: str, f: dict | None) -> str:
    r = f["rounds"][0]
    lag = r["state_lag_seconds"]["p95"]
    return (f"{r['launches']} launches: " + ", ".join(
        f"{n}× {k}" for k, n in sorted(r["launch_answers"].items()))
        + f"; admitted {r['admitted']} of quota {r['quota']}, all running "
        f"{r['seconds_to_all_running']:.1f} s; GETs {r['get_answers']}; lag p95 "
        f"{lag * 1000:.0f} ms; lost tracker cycles {len(r['tracker']['lost'])}")


def webhooks_figures(_text: str, f: dict | None) -> str:
    a, b = f["tests_at_once"], f["launch_beside_dead_hooks"]
    return (f"{a['tests']} tests at once at a dead address: {a['answers']} in "
            f"{a['burst_answered_in_seconds']} s, /healthz max "
            f"{a['healthz_during_seconds']['max'] * 1000:.0f} ms (p95 "
            f"{a['healthz_during_seconds']['p95'] * 1000:.0f} ms; 24 plain reads: "
            f"{a['control_same_number_of_api_reads']['healthz_during_seconds']['max'] * 1000:.0f}"
            f" ms); {b['hooks']} dead webhooks + a finished job: another project's launch "
            f"creating ≤ {b['worst_to_creating_s'] * 1000:.0f} ms")


@dataclasses.dataclass
class Bench:
    name: str
    args: list[str]
    timeout: int
    figures: Callable[[str, dict | None], str]
    json: bool = False  # takes --json PATH
    real_cluster: bool = False  # runs the real control plane: its binaries must be built

    @property
    def script(self) -> Path:
        return REPO / self.args[0]


BENCHES = [
    Bench("kubesim", ["bench/kubesim_bench.py", "--rounds", "20"], 180, kubesim_figures),
    Bench("tracking", ["bench/tracking_bench.py", "--sizes", "10,1000", "--launches", "20"],
          240, tracking_figures),
    Bench("launch", ["bench/launch_bench.py", "--launches", "10", "--warmup", "2"], 300,
          launch_figures, json=True),
    # the same two on the real control plane (stack/k8s/), and its start-up
    Bench("controlplane", ["bench/controlplane_bench.py", "--repeats", "1"], 180,
          controlplane_figures, json=True, real_cluster=True),
    Bench("tracking_kube", ["bench/tracking_bench.py", "--cluster", "kube", "--sizes",
                            "10,1000", "--launches", "20"], 300, tracking_figures,
          real_cluster=True),
    Bench("launch_kube", ["bench/launch_bench.py", "--cluster", "kube", "--launches", "10",
                          "--warmup", "2"], 300, launch_figures, json=True, real_cluster=True),
    Bench("queueing", ["bench/queueing_bench.py", "--launches", "60", "--tenants", "10"], 300,
          queueing_figures, json=True, real_cluster=True),
    Bench("distributed", ["bench/distributed_bench.py", "--jobs", "10", "--tenants", "5"], 300,
          distributed_figures, json=True, real_cluster=True),
    Bench("capacity", ["bench/capacity_bench.py", "--sizes", "100,5000", "--requests", "50"],
          600, capacity_figures),
    Bench("usage", ["bench/usage_bench.py", "--samples", "400000", "--cycles", "100"], 300,
          usage_figures),
    Bench("notifications", ["bench/notifications_bench.py", "--events", "2000", "--owners",
                            "200"], 300, notifications_figures, json=True),
    Bench("budget", ["bench/budget_bench.py", "--workloads", "5000", "--calls", "200"], 300,
          budget_figures, json=True),
    Bench("calendar", ["bench/calendar_bench.py", "--reservations", "500", "--windows", "20",
                       "--calls", "100"], 300, calendar_figures, json=True),
    Bench("ssh", ["bench/ssh_bench.py", "--size-mb", "20", "--runs", "1"], 300, ssh_figures,
          json=True),
    Bench("api_auth", ["bench/api_auth_bench.py", "--requests", "100", "--warmup", "10",
                       "--misses", "5"], 240, api_auth_figures, json=True),
    Bench("load", ["bench/load/load_bench.py", "--users", "20", "--duration", "30",
                   "--burst", "50", "--settle", "90"], 420, load_figures, json=True),
    Bench("demo_burst", ["bench/demo_burst_bench.py", "--launches", "30", "--quota", "8",
                         "--gets", "100"], 300, demo_burst_figures, json=True),
    Bench("webhooks", ["bench/webhooks_bench.py", "--fresh"], 300, webhooks_figures, json=True),
    Bench("browser", ["bench/browser_bench.py", "--loads", "3"], 300,
          _lines(r"^launch page, median", r"^repeat visit")),
]


def control_plane_missing() -> list[str]:
    """The real control plane's components not built yet (a Go build takes far longer than a
    quick benchmark may: `python -m stack.k8s.build`, which `make bench` runs first, builds them)."""
    sys.path.insert(0, str(REPO))
    from stack.k8s import build

    return [name for name, component in build.COMPONENTS.items() if not component.built()]


def run_one(bench: Bench) -> dict:
    log_path = OUT / f"{bench.name}.log"
    json_path = OUT / f"{bench.name}.json"
    args = list(bench.args)
    if bench.json:
        json_path.unlink(missing_ok=True)
        args += ["--json", str(json_path)]
    print(f"\n=== {bench.name}: {' '.join(args)}", flush=True)
    started = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        timed_out = threading.Event()

        def out_of_time() -> None:  # even when it prints nothing more
            timed_out.set()
            proc.send_signal(signal.SIGINT)  # its finally: blocks stop what it started
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(120)
                return
            proc.kill()

        watchdog = threading.Timer(bench.timeout, out_of_time)
        watchdog.daemon = True
        watchdog.start()
        try:
            for line in proc.stdout:  # stream it: a long benchmark shows it is alive
                log.write(line)
                print(f"  {bench.name}| {line}", end="", flush=True)
        except KeyboardInterrupt:  # it runs in its own session: pass Ctrl-C on, let it clean up
            proc.send_signal(signal.SIGINT)
            proc.wait(120)
            raise
        finally:
            watchdog.cancel()
        rc = proc.wait()
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    figures = json.loads(json_path.read_text()) if bench.json and json_path.exists() else None
    try:
        summary = bench.figures(text, figures) if rc == 0 or figures else ""
    except (KeyError, ValueError, TypeError) as exc:
        summary = f"(figures unreadable: {exc!r})"
    status = "timed out" if timed_out.is_set() else ("ok" if rc == 0 else f"failed (exit {rc})")
    return {"name": bench.name, "status": status, "seconds": seconds, "figures": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated names: " +
                        ", ".join(b.name for b in BENCHES))
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    args = parser.parse_args(argv)
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    if args.list:
        for bench in chosen:
            print(f"{bench.name:13} {' '.join(bench.args)}")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    began = time.strftime("%Y-%m-%d %H:%M")
    load_before = os.getloadavg()
    results = []
    for bench in chosen:
        if not bench.script.exists():
            results.append({"name": bench.name, "status": "not present", "seconds": 0.0,
                            "figures": f"{bench.args[0]} does not exist in this tree"})
            continue
        if bench.real_cluster and (missing := control_plane_missing()):
            results.append({"name": bench.name, "status": "not run", "seconds": 0.0,
                            "figures": f"the real control plane is not built ({', '.join(missing)})"
                                       ": run `.venv/bin/python -m stack.k8s.build` first"})
            continue
        results.append(run_one(bench))
    print(f"\n## make bench, {began}, {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"(quick sizes; the recorded figures are in bench/README.md)\n")
    print("| benchmark | result | time | figures |")
    print("| --- | --- | ---: | --- |")
    for r in results:
        print(f"| {r['name']} | {r['status']} | {r['seconds']:.0f} s | {r['figures']} |")
    print(f"\nfull output: {OUT.relative_to(REPO)}/<name>.log")
    return 0 if all(r["status"] in ("ok", "not present") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
