"""What the load test records: every request's outcome by endpoint, the memory of every process
of the stack, and the machine's load average."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
import time

import psutil

# An outcome is one of:
#   ok       the status the endpoint answers when it did what was asked (200, 201, 202, 302)
#   refused  a launch answered 403 with code `quota_exceeded`: the quota said no, as it must
#   error    anything else: a transport error or client timeout, a 5xx, a 4xx other than that
#            refusal (429 included: the run stays under the throttle), an unexpected 2xx/3xx
OK, REFUSED, ERROR = "ok", "refused", "error"


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(q / 100 * len(ordered) + 0.999999)))
    return ordered[rank - 1]


@dataclasses.dataclass
class Sample:
    endpoint: str  # "GET /api/v1/workloads/{id}/": the route template, not the path
    seconds: float
    outcome: str
    status: int | None
    phase: str
    at: float  # time.monotonic() when it ended


class Recorder:
    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.errors: list[str] = []  # the first few, verbatim
        self.phase = "steady"

    def add(self, endpoint: str, seconds: float, outcome: str, status: int | None,
            detail: str = "") -> None:
        self.samples.append(Sample(endpoint, seconds, outcome, status, self.phase,
                                   time.monotonic()))
        if outcome == ERROR and len(self.errors) < 40:
            self.errors.append(f"[{self.phase}] {endpoint} → {status}: {detail[:300]}")

    def table(self, phase: str, duration: float) -> list[dict]:
        by_endpoint: dict[str, list[Sample]] = collections.defaultdict(list)
        for sample in self.samples:
            if sample.phase == phase:
                by_endpoint[sample.endpoint].append(sample)
        rows = []
        everything = [s for s in self.samples if s.phase == phase]
        for endpoint, samples in [*sorted(by_endpoint.items()), ("all", everything)]:
            if not samples:
                continue
            times = [s.seconds * 1000 for s in samples]
            rows.append({
                "endpoint": endpoint, "count": len(samples),
                "rps": len(samples) / duration if duration else 0.0,
                "p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "p99_ms": pct(times, 99),
                "max_ms": max(times),
                "refused": sum(s.outcome == REFUSED for s in samples),
                "errors": sum(s.outcome == ERROR for s in samples),
                "statuses": dict(collections.Counter(str(s.status) for s in samples)),
            })
        return rows


    def timeline(self, phase: str, bucket: float = 60.0) -> list[dict]:
        """Requests, throughput and latency of the phase in consecutive windows: does it hold
        up over time?"""
        samples = [s for s in self.samples if s.phase == phase]
        if not samples:
            return []
        start = min(s.at - s.seconds for s in samples)
        windows: dict[int, list[Sample]] = collections.defaultdict(list)
        for sample in samples:
            windows[int((sample.at - start) // bucket)].append(sample)
        end = max(s.at for s in samples) - start
        rows = []
        for index in sorted(windows):
            times = [s.seconds * 1000 for s in windows[index]]
            span = min(bucket, end - index * bucket) or bucket  # the last one may be short
            rows.append({"from_s": index * bucket, "count": len(times),
                         "rps": len(times) / span, "p50_ms": pct(times, 50),
                         "p95_ms": pct(times, 95), "p99_ms": pct(times, 99),
                         "errors": sum(s.outcome == ERROR for s in windows[index])})
        return rows


class MemorySampler(threading.Thread):
    """Every `interval` seconds: the RSS of every process in each role's process tree (the
    role's root and all its descendants), and the machine's load average. Keeps the peak of
    each process, the peak of each role's sum, and each role's peak PSS sum (RSS sums count
    pages that forked children share with their parent more than once; PSS does not)."""

    def __init__(self, roots: dict[str, int], interval: float = 1.0,
                 pss_every: int = 5) -> None:
        super().__init__(daemon=True)
        self.roots = roots
        self.interval = interval
        self.pss_every = pss_every
        self.peak_rss: dict[tuple[str, int], tuple[str, int]] = {}  # (role, pid) -> (name, B)
        self.peak_role_rss: dict[str, int] = collections.defaultdict(int)
        self.peak_role_pss: dict[str, int] = collections.defaultdict(int)
        self.loadavg: list[tuple[float, float]] = []  # (time, 1-minute load average)
        self.stopped = threading.Event()
        self.ticks = 0
        self.cpu_first: dict[tuple[str, int], float] = {}  # (role, pid) -> CPU s, first seen
        self.cpu_last: dict[tuple[str, int], float] = {}
        self.machine_busy_first = _machine_busy()
        self.machine_busy_last = self.machine_busy_first

    def _tree(self, pid: int) -> list[psutil.Process]:
        try:
            root = psutil.Process(pid)
            if pid == os.getpid():  # the sampling process: itself, not the stack it started
                return [root]
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def sample(self) -> None:
        with_pss = self.ticks % self.pss_every == 0
        self.ticks += 1
        self.machine_busy_last = _machine_busy()
        self.loadavg.append((time.time(), os.getloadavg()[0]))
        for role, pid in self.roots.items():
            rss_sum = pss_sum = 0
            for proc in self._tree(pid):
                try:
                    name = proc.name()
                    if name == "runuser":  # the wrapper that runs PostgreSQL as `postgres`
                        continue
                    if with_pss:
                        info = proc.memory_full_info()
                        pss_sum += info.pss
                    else:
                        info = proc.memory_info()
                except psutil.Error:
                    continue
                rss_sum += info.rss
                key = (role, proc.pid)
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    self.cpu_last[key] = times.user + times.system
                    self.cpu_first.setdefault(key, self.cpu_last[key])
                if info.rss > self.peak_rss.get(key, ("", 0))[1]:
                    self.peak_rss[key] = (_label(proc, name), info.rss)
            self.peak_role_rss[role] = max(self.peak_role_rss[role], rss_sum)
            if with_pss:
                self.peak_role_pss[role] = max(self.peak_role_pss[role], pss_sum)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        self.sample()

    def report(self) -> list[dict]:
        rows = []
        for role in self.roots:
            procs = sorted((v for (r, _pid), v in self.peak_rss.items() if r == role),
                           key=lambda v: -v[1])
            kinds: dict[str, list[int]] = collections.defaultdict(list)
            for label, rss in procs:
                kinds[label].append(rss)
            rows.append({
                "role": role,
                "processes": {label: [round(b / 2**20, 1) for b in values]
                              for label, values in kinds.items()},
                "peak_rss_sum_mib": round(self.peak_role_rss[role] / 2**20, 1),
                "peak_pss_sum_mib": round(self.peak_role_pss[role] / 2**20, 1),
                "cpu_seconds": round(sum(self.cpu_last[k] - self.cpu_first[k]
                                         for k in self.cpu_last if k[0] == role), 1),
            })
        return rows

    def machine_cpu_seconds(self) -> float:
        """CPU seconds the whole machine was busy (all cores) while sampling."""
        return round(self.machine_busy_last - self.machine_busy_first, 1)


def _machine_busy() -> float:
    times = psutil.cpu_times()
    return times.user + times.nice + times.system + times.irq + times.softirq + times.steal


def _label(proc: psutil.Process, name: str) -> str:
    """A short kind for a process: gunicorn master/worker, celery main/pool child, …"""
    try:
        cmdline = " ".join(proc.cmdline())
        parent = proc.parent()
        parent_name = parent.name() if parent else ""
    except psutil.Error:
        return name
    if "gunicorn" in cmdline:
        return "worker" if "gunicorn" in " ".join(parent.cmdline()) else "master"
    if "celery" in cmdline:
        return "pool child" if "celery" in " ".join(parent.cmdline()) else "main"
    if name.startswith("postgres") or "postgres" in cmdline:
        return "postmaster" if parent_name == "runuser" else "backend/aux"
    return name


def machine_snapshot(exclude: set[int], seconds: float = 2.0) -> list[str]:
    """The processes outside the stack that used the most CPU over `seconds` (what else ran)."""
    procs = {}
    for proc in psutil.process_iter(["pid"]):
        if proc.pid not in exclude:
            with contextlib.suppress(psutil.Error):
                proc.cpu_percent(None)
                procs[proc.pid] = proc
    time.sleep(seconds)
    busy = []
    for pid, proc in procs.items():
        with contextlib.suppress(psutil.Error):
            share = proc.cpu_percent(None)
            if share >= 5:
                busy.append((share, pid, " ".join(proc.cmdline())[:110]))
    return [f"{share:.0f}% pid {pid}: {cmd}" for share, pid, cmd in sorted(busy, reverse=True)[:8]]
