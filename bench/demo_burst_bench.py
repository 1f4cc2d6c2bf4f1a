#!/usr/bin/env python
"""The embedded demo under a script's burst: `make demo`'s own configuration
(stack/demo.py: SQLite, its web server, one Celery worker, the tracker, beat, Redis, Keystone,
kubesim), started on a temporary folder and free ports (stack/demo_stack.py), then the burst of
stack/burst.py: N one-GPU Jupyter launches at once with a fresh Keystone token (and a few batch
jobs beside them), then M parallel GETs of the workload list.

    .venv/bin/python bench/demo_burst_bench.py [--launches 50] [--quota 12] [--batch 4]
        [--gets 200] [--web gunicorn|runserver] [--rounds 1] [--json out.json] [--keep]

Reported: the answers (201 / 403 quota_exceeded / anything else), admitted vs the quota, the
GETs' answers and latencies, the wall time from the burst to the last admitted notebook running
(KubeSpawner's figure on the same kubesim, from the issue: 16 of 16 running in 4.7 s), the lag
from a cluster state change to the portal's state (p95 goal ≤ 2 s), and the tracker's log
(cycles done, lost cycles, "database is locked" in any process's log).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from stack.burst import locked_lines, run_burst, tracker_log_report  # noqa: E402
from stack.demo import WEB_SERVER  # noqa: E402
from stack.demo_stack import DemoStack  # noqa: E402


def log(message: str, _started=time.monotonic()) -> None:  # noqa: B008 - the run's clock
    print(f"[{time.monotonic() - _started:7.1f} s] {message}", flush=True)


def one_round(args, n: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="demo-burst-"))
    stack = DemoStack(root, web=args.web)
    try:
        log(f"round {n}: starting the demo's configuration under {root} (web: {args.web})")
        stack.start()
        log(f"demo up at {stack.url}")
        figures = run_burst(stack.url, stack.keystone.url, stack.kubeconfig,
                            launches=args.launches, quota=args.quota, batch=args.batch,
                            gets=args.gets, log=log)
        time.sleep(args.linger)  # the tracker's cycle under way ends and logs
        figures["tracker"] = tracker_log_report(stack.log("tracker"))
        figures["database_is_locked"] = locked_lines(
            {name: stack.log(name) for name in stack.procs})
        figures["processes_alive"] = stack.running()
        figures["web"] = args.web
        return figures
    finally:
        stack.close()
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=50)
    parser.add_argument("--quota", type=int, default=12, help="vision-lab's A100 quota")
    parser.add_argument("--batch", type=int, default=4, help="batch jobs (V100) in the burst")
    parser.add_argument("--gets", type=int, default=200)
    parser.add_argument("--web", choices=("gunicorn", "runserver"), default=WEB_SERVER)
    parser.add_argument("--rounds", type=int, default=1, help="fresh demo each round")
    parser.add_argument("--linger", type=float, default=16.0,
                        help="seconds after the burst before the logs are read")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    rounds = [one_round(args, n + 1) for n in range(args.rounds)]
    for n, r in enumerate(rounds, 1):
        slim = {k: v for k, v in r.items() if k not in ("admitted_ids", "job_ids", "states")}
        log(f"round {n}: " + json.dumps(slim, indent=1, default=str))
    ok = all(
        set(r["launch_answers"]) <= {"201", "403 quota_exceeded"}
        and r["admitted"] == min(r["quota"], r["launches"])
        and set(r["get_answers"]) == {"200"} and r["all_running"]
        and not r["tracker"]["lost"] for r in rounds)
    result = {"rounds": rounds, "ok": ok}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({"ok": ok, "web": args.web, "rounds": [
        {k: r[k] for k in ("launch_answers", "job_answers", "admitted", "get_answers",
                           "seconds_to_all_running", "state_lag_seconds", "tracker",
                           "database_is_locked")} for r in rounds]}, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
