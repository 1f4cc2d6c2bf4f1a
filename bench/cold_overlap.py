"""How long a cold `make test` takes with the Go components building in the background: a model
from a run's test durations and the components' build times, not a run.

Reads the suite's collection (the units `make test` hands out, in tests/fixtures/scheduling.py's
order, and the Go components each unit's tests run: tests/fixtures/builds.py), each test's seconds
from a JUnit XML report of a warm run, and each component's build seconds from a cold build's log
(the "built NAME in N s" lines of `python -m stack.k8s.build`). Then it plays the run out in steps
of 50 ms: the background build starts with `make lint`, builds the components in NEED_ORDER and
gets what CPU the rest leaves (`--setup-share` of its own speed while pip, npm and lint run; while
pytest runs, 2 cores less `--busy-cores` for each test process running a test, over 2); the two
test processes take the units in order, and one whose tests need a component not built yet waits
for it, idle. The tests' own durations are taken as they were (the build is niced).

    .venv/bin/python bench/cold_overlap.py --junit /tmp/ci21-junit.xml --build-log BUILD.err \\
        [--setup 225] [--setup-share 0.5] [--busy-cores 0.5 0.75 1.0]
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORKERS = 2
CORES = 2
STEP = 0.05  # seconds: a unit that ends lets the next start within a step


def collect() -> list[Any]:
    """The suite's items, collected as `make test` collects them (nothing runs)."""
    import pytest

    found: list[Any] = []

    class Keep:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            found.extend(session.items)

    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                       plugins=[Keep()])
    if code != 0:
        raise SystemExit(f"collection failed ({code})")
    return found


def junit_seconds(path: Path) -> dict[tuple[str, str], float]:
    took: dict[tuple[str, str], float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        took[key] = took.get(key, 0.0) + float(case.get("time") or 0)
    return took


def build_seconds(log: Path) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^built (\S+) in (\d+) s$", log.read_text(),
                                                   re.MULTILINE)}


Segment = tuple[float, tuple[str, ...]]  # seconds of consecutive tests, the components they need


def units(items: list[Any], took: dict[tuple[str, str], float]) -> list[tuple[str, list[Segment]]]:
    """Each unit, in the order the units go out in: its tests in order, as runs of tests that
    need the same components."""
    from tests.fixtures.builds import needed
    from tests.fixtures.scheduling import file_of, ordered

    groups: dict[str, str] = {}
    result: dict[str, list[Segment]] = {}
    for item in ordered(items, groups):
        path, *rest = item.nodeid.split("::")
        classname = ".".join([path.removesuffix(".py").replace("/", "."), *rest[:-1]])
        segments = result.setdefault(groups.get(item.nodeid) or file_of(item.nodeid), [])
        seconds, needs = took.get((classname, rest[-1]), 0.0), needed(item)
        if segments and segments[-1][1] == needs:
            seconds += segments.pop()[0]
        segments.append((seconds, needs))
    return list(result.items())


def play(work: list[tuple[str, list[Segment]]], costs: dict[str, float], order: tuple[str, ...],
         *, setup: float, setup_share: float, busy_cores: float
         ) -> tuple[float, dict[str, float], float]:
    """Seconds from `make lint`'s start to the last test's end; when each component was built;
    the seconds test processes spent waiting for a build."""
    left = [costs.get(name, 0.0) for name in order]
    done: dict[str, float] = {}
    queue = [list(segments) for _, segments in work]
    running: list[list[Segment]] = [[] for _ in range(WORKERS)]  # each process's segments left
    t, waited = 0.0, 0.0

    def advance_build(budget: float) -> None:
        while len(done) < len(order):
            i = len(done)
            spent = min(budget, left[i])
            left[i] -= spent
            budget -= spent
            if left[i] > 1e-9:
                return
            done[order[i]] = t

    advance_build(0)
    while t < setup:
        t += STEP
        advance_build(setup_share * STEP)
    while True:
        busy: list[list[Segment]] = []
        for segments in running:
            if not segments and queue:
                segments.extend(queue.pop(0))
            if segments and all(name in done for name in segments[0][1]):
                busy.append(segments)
            elif segments:
                waited += STEP
        if not any(running) and not queue:
            return t, done, waited
        t += STEP
        for segments in busy:
            seconds, needs = segments[0]
            if seconds <= STEP:
                segments.pop(0)
            else:
                segments[0] = (seconds - STEP, needs)
        advance_build(max(0.0, CORES - busy_cores * len(busy)) / CORES * STEP)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--junit", type=Path, required=True)
    parser.add_argument("--build-log", type=Path, nargs="+", required=True,
                        help="one or more logs: the model is played with each")
    parser.add_argument("--setup", type=float, default=225.0,
                        help="seconds from `make lint`'s start to pytest's (lint, npm, apt, Keystone)")
    parser.add_argument("--setup-share", type=float, default=0.5,
                        help="the build's speed while they run, a share of its speed alone")
    parser.add_argument("--busy-cores", type=float, nargs="+", default=[0.5, 0.75, 1.0],
                        help="cores a test process uses while it runs a test")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from stack.k8s import build

    work = units(collect(), junit_seconds(args.junit))
    total_tests = sum(s for _, segments in work for s, _ in segments)
    cluster_start = 0.0
    for _, segments in work:
        if any(set(needs) & set(build.CONTROL_PLANE) for _, needs in segments):
            break
        cluster_start += sum(s for s, _ in segments)
    print(f"\ntests: {total_tests:.0f} s in {len(work)} units; before the first unit with a "
          f"control plane: {cluster_start:.0f} s of tests ({cluster_start / WORKERS:.0f} s on "
          f"{WORKERS} processes)")
    print("| unit (its tests that need components) | s | needs |\n| --- | ---: | --- |")
    for unit, segments in work:
        for seconds, needs in segments:
            if needs:
                print(f"| {unit} | {seconds:.0f} | {', '.join(needs)} |")
    tests_alone, _, _ = play(work, {}, build.NEED_ORDER, setup=0, setup_share=1, busy_cores=1)
    for log in args.build_log:
        costs = build_seconds(log)
        missing = set(build.COMPONENTS) - set(costs)
        print(f"\n{log}: builds alone {sum(costs.values()):.0f} s"
              + (f" (no time for {', '.join(sorted(missing))}: 0 s)" if missing else ""))
        print(f"before (the builds, then the tests): {args.setup:.0f} + {sum(costs.values()):.0f}"
              f" + {tests_alone:.0f} = {args.setup + sum(costs.values()) + tests_alone:.0f} s")
        print("| busy cores per test process | make test, s | waited for builds, s (both "
              "processes) | control plane built at, s | all built at, s |\n"
              "| ---: | ---: | ---: | ---: | ---: |")
        for busy in args.busy_cores:
            total, done, waited = play(work, costs, build.NEED_ORDER, setup=args.setup,
                                       setup_share=args.setup_share, busy_cores=busy)
            plane = max(done.get(n, total) for n in build.CONTROL_PLANE)
            print(f"| {busy} | {total:.0f} | {waited:.0f} | {plane:.0f} | "
                  f"{max(done.values()):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
