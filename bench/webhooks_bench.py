#!/usr/bin/env python
"""Webhooks at a dead address against the demo: the web server and launches do not wait for them.

    # against a running `make demo` started with PORTAL_WEBHOOK_ALLOW_PRIVATE=1
    .venv/bin/python bench/webhooks_bench.py [--url http://127.0.0.1:8000]
        [--keystone http://127.0.0.1:5000/v3] [--tests 24] [--hooks 10] [--json out.json]
    # or the demo's own configuration on a temporary folder and free ports (bench/run.py)
    .venv/bin/python bench/webhooks_bench.py --fresh

The dead address: a TCP listener on loopback, started here, that accepts every connection and
never answers, so each POST waits its whole PORTAL_WEBHOOK_TIMEOUT_SECONDS (5 s) as it would
for a host that drops packets (which cannot be had offline and reproducibly; loopback needs
PORTAL_WEBHOOK_ALLOW_PRIVATE=1, which `--fresh` sets and a running demo must have been started
with).

(a) `--tests` test POSTs at once (`POST …/webhooks/{id}/test/`), spread over the five demo users
    (one webhook each at the dead address; at most 5 each, under the default test rate of 10 a
    minute), while /healthz is asked every 20 ms: its latency before and during, and the
    tests' answers (202 at once). Goal: /healthz under 0.2 s.
(b) `--hooks` webhooks at the dead address (researcher's own five, and lead's five of
    vision-lab: PORTAL_WEBHOOKS_PER_USER is 5) and a finished batch job of researcher's in
    vision-lab: as soon as its "finished" notification exists, student launches in nlp-lab
    (three batch jobs, 2 s apart); each one's time from the answer to `creating`. Goal: 1 s.

The demo's webhooks of these users are deleted first and at the end (a benchmark's demo).
Results: bench/results/webhooks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from stack.burst import Portal, all_at_once, keystone_token, summary  # noqa: E402
from stack.keystone import ADMIN_PASSWORD  # noqa: E402

# who: (password, project) — the demo's people (stack/identities.py)
PEOPLE = {"admin": (ADMIN_PASSWORD, "admin"), "researcher": ("researcher-demo-pass", "vision-lab"),
          "lead": ("lead-demo-pass", "vision-lab"), "student": ("student-demo-pass", "nlp-lab"),
          "viewer": ("viewer-demo-pass", "vision-lab")}
HEALTHZ_EVERY = 0.02
GOAL_HEALTHZ_S = 0.2
GOAL_CREATING_S = 1.0


def log(message: str, _started=time.monotonic()) -> None:  # noqa: B008 - the run's clock
    print(f"[{time.monotonic() - _started:7.1f} s] {message}", flush=True)


class DeadAddress:
    """A loopback port that takes every connection and never answers a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.held: list[socket.socket] = []
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks/dead"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted += 1

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


class HealthzProbe:
    """GET /healthz every HEALTHZ_EVERY seconds in a thread: (monotonic time, seconds) each."""

    def __init__(self, url: str) -> None:
        import httpx

        self.http = httpx.Client(base_url=url, timeout=30)
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> HealthzProbe:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            response = self.http.get("/healthz")
            took = time.monotonic() - started
            if response.status_code != 200:
                log(f"/healthz answered {response.status_code}")
            self.samples.append((started, took))
            self._stop.wait(HEALTHZ_EVERY)

    def between(self, since: float, until: float) -> list[float]:
        return [took for at, took in self.samples if since <= at < until]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.http.close()


def clean_webhooks(portals: dict[str, Portal]) -> None:
    """Every webhook these users manage goes (their own; vision-lab's for lead)."""
    for portal in portals.values():
        listed = portal.timed("GET", "/notifications/webhooks/", params={"page_size": 500})
        for hook in (listed["body"] or {}).get("results", []):
            if hook["manageable"]:
                portal.timed("DELETE", f"/notifications/webhooks/{hook['id']}/")


def add_webhook(portal: Portal, url: str, **body: Any) -> int:
    made = portal.timed("POST", "/notifications/webhooks/", json={"url": url, **body})
    if made["status"] != 201:
        raise SystemExit(f"a webhook was refused: {made['status']} {made['body']}"
                         " (is the demo running with PORTAL_WEBHOOK_ALLOW_PRIVATE=1?)")
    return int(made["body"]["id"])


def burst_beside_healthz(url: str, calls: list) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The calls at once, /healthz asked every 20 ms from a second before to 8 s after."""
    probe = HealthzProbe(url).start()
    time.sleep(1.0)
    burst_at = time.monotonic()
    answers = all_at_once(calls, len(calls))
    answered_at = time.monotonic()
    time.sleep(8.0)  # while the workers hold the POSTs (5 s each, then their retries)
    probe.stop()
    during = probe.between(burst_at, time.monotonic())
    return answers, {
        "answers": {str(s): sum(1 for a in answers if a["status"] == s)
                    for s in sorted({a["status"] for a in answers}, key=str)},
        "answer_seconds": summary([a["seconds"] for a in answers]),
        "burst_answered_in_seconds": round(answered_at - burst_at, 3),
        "healthz_before_seconds": summary(probe.between(0, burst_at)),
        "healthz_during_seconds": summary(during),
        "healthz_over_goal": sum(1 for took in during if took >= GOAL_HEALTHZ_S),
        "healthz_after_answers_seconds": summary(probe.between(answered_at, time.monotonic())),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "goal_met": bool(during) and max(during) < GOAL_HEALTHZ_S,
    }


def tests_at_once(url: str, portals: dict[str, Portal], dead: DeadAddress, tests: int
                  ) -> dict[str, Any]:
    hooks = {who: add_webhook(portal, dead.url) for who, portal in portals.items()}
    order = list(portals)
    callers = [order[i % len(order)] for i in range(tests)]  # at most 5 each: under the rate
    _, control = burst_beside_healthz(url, [
        (lambda who=who: portals[who].timed("GET", "/notifications/webhooks/"))
        for who in callers])
    _, figures = burst_beside_healthz(url, [
        (lambda who=who: portals[who].timed("POST",
                                            f"/notifications/webhooks/{hooks[who]}/test/"))
        for who in callers])
    # the control: as many API reads at once, no webhook involved (what any burst of
    # requests does to a /healthz waiting for one of the web server's threads)
    return {"tests": tests, **figures, "dead_address_connections": dead.accepted,
            "control_same_number_of_api_reads": control}


def wait_state(portal: Portal, workload_id: int, done: Any, timeout: float = 120.0,
               every: float = 0.02) -> tuple[str, float]:
    """Poll the workload until `done(state)`: (that state, seconds from the call)."""
    started = time.monotonic()
    while True:
        state = portal.timed("GET", f"/workloads/{workload_id}/")["body"]["state"]
        if done(state) or time.monotonic() - started > timeout:
            return state, time.monotonic() - started
        time.sleep(every)


def launch(portal: Portal, name: str, gpu_type: str) -> dict[str, Any]:
    answer = portal.timed("POST", "/workloads/", json={
        "name": name, "template": "custom", "kind": "batch", "gpu_type": gpu_type,
        "gpu_count": 1, "image": "busybox:1.36", "command": ["sleep", "1"]})
    if answer["status"] != 201:
        raise SystemExit(f"launch {name} refused: {answer['status']} {answer['body']}")
    return answer


def launch_beside_dead_hooks(portals: dict[str, Portal], dead: DeadAddress, hooks: int,
                             launches: int = 3) -> dict[str, Any]:
    clean_webhooks(portals)
    researcher, lead, student = portals["researcher"], portals["lead"], portals["student"]
    own = min(hooks, 5)
    for _ in range(own):
        add_webhook(researcher, dead.url)
    vision = next(t for t in lead.timed("GET", "/tenants/")["body"]["results"]
                  if t["name"] == "vision-lab")
    for _ in range(hooks - own):
        add_webhook(lead, dead.url, tenant=vision["id"])
    job = launch(researcher, "webhooks bench job", "v100")["body"]
    state, _ = wait_state(researcher, job["id"],
                          lambda state: state in ("succeeded", "failed", "stopped"))
    log(f"researcher's job {job['id']} {state}")

    def finished_told() -> bool:
        rows = researcher.timed("GET", "/notifications/", params={"kind": "finished"})["body"]
        return any(row["workload"] == job["id"] for row in rows["results"])

    while not finished_told():
        time.sleep(0.05)
    told_at = time.monotonic()
    connections_then = dead.accepted
    results = []
    for n in range(launches):
        answer = launch(student, f"webhooks bench {n}", "t4")
        # the launch task has run once the workload leaves `submitted` (creating and on)
        state, seconds = wait_state(student, answer["body"]["id"],
                                    lambda state: state != "submitted")
        results.append({"after_finished_s": round(time.monotonic() - told_at, 2),
                        "answer_s": round(answer["seconds"], 3), "state": state,
                        "to_creating_s": round(seconds, 3),
                        "dead_address_connections": dead.accepted})
        log(f"student's launch {n}: 201 in {answer['seconds']:.3f} s, {state} "
            f"{seconds:.3f} s later ({dead.accepted} connections held at the dead address)")
        student.timed("DELETE", f"/workloads/{answer['body']['id']}/")
        time.sleep(2.0)
    researcher.timed("DELETE", f"/workloads/{job['id']}/")
    worst = max(r["to_creating_s"] for r in results)
    return {"hooks": hooks, "launches": results, "worst_to_creating_s": worst,
            "dead_address_connections_at_finish": connections_then,
            "goal_met": worst < GOAL_CREATING_S}


def run(url: str, keystone_url: str, args: argparse.Namespace) -> dict[str, Any]:
    portals = {who: Portal(url, keystone_token(keystone_url, who, password, project))
               for who, (password, project) in PEOPLE.items()}
    dead = DeadAddress()
    try:
        clean_webhooks(portals)
        log(f"(a) {args.tests} webhook tests at once at {dead.url}")
        a = tests_at_once(url, portals, dead, args.tests)
        log(f"(a) {json.dumps(a)}")
        log(f"(b) {args.hooks} webhooks at the dead address and a finished job")
        b = launch_beside_dead_hooks(portals, dead, args.hooks)
        log(f"(b) {json.dumps(b)}")
        return {"tests_at_once": a, "launch_beside_dead_hooks": b}
    finally:
        clean_webhooks(portals)
        for portal in portals.values():
            portal.close()
        dead.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--keystone", default="http://127.0.0.1:5000/v3")
    parser.add_argument("--fresh", action="store_true",
                        help="start the demo's configuration on a temporary folder")
    parser.add_argument("--tests", type=int, default=24)
    parser.add_argument("--hooks", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.hooks > 15:
        parser.error("--hooks: at most 15 (5 of researcher's own and 10 of vision-lab's)")
    if args.fresh:
        from stack.demo_stack import DemoStack

        os.environ["PORTAL_WEBHOOK_ALLOW_PRIVATE"] = "1"
        root = Path(tempfile.mkdtemp(prefix="webhooks-bench-"))
        stack = DemoStack(root)
        try:
            log(f"starting the demo's configuration under {root}")
            stack.start()
            figures = run(stack.url, stack.keystone.url, args)
        finally:
            stack.close()
            shutil.rmtree(root, ignore_errors=True)
    else:
        figures = run(args.url, args.keystone, args)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    ok = figures["tests_at_once"]["goal_met"] and figures["launch_beside_dead_hooks"]["goal_met"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
