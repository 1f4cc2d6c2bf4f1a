#!/usr/bin/env python
"""When each test process of `make test` would end, replayed on a run's per-test times.

    .venv/bin/python bench/xdist_replay.py JUNIT.xml [--built | --not-built]

The tests are collected here (no test runs) and put in the order their units go out in
(tests/fixtures/scheduling.py's `ordered`, with the control planes taken as built or not);
then pytest-xdist's hand-out under `--dist loadfile` is replayed on the JUnit XML's per-test
times (setup, call and teardown): each process gets a unit at the start, another while it has
two tests or fewer left. A test the report lacks counts 0 s. Prints the seconds at which each
process ends. A model: each test's time is what it took in that run, beside whatever else ran.
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKERS = 2


class Units:
    """pytest plugin: the collection's units, in the order they go out in."""

    def __init__(self, built: bool) -> None:
        self.built = built
        self.units: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from tests.fixtures.scheduling import file_of, ordered

        groups: dict[str, str] = {}
        for item in ordered(list(session.items), groups, clusters_built=self.built):
            self.units.setdefault(groups.get(item.nodeid) or file_of(item.nodeid),
                                  []).append(item.nodeid)


def seconds_by_test(junit: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        for cut in range(len(parts), 0, -1):  # a class's tests: module parts, then the class
            nodeid = "::".join(["/".join(parts[:cut]) + ".py", *parts[cut:], case.get("name", "")])
            times.setdefault(nodeid, float(case.get("time") or 0))
    return times


def replay(units: list[list[float]], workers: int = WORKERS) -> list[float]:
    queue = collections.deque(units)
    pending: list[collections.deque[float]] = [collections.deque() for _ in range(workers)]
    clock = [0.0] * workers

    def hand_out(worker: int) -> None:
        if queue and len(pending[worker]) <= 2:
            pending[worker].extend(queue.popleft())

    for worker in range(workers):
        hand_out(worker)
    for worker in range(workers):
        hand_out(worker)
    while any(pending):
        worker = min((w for w in range(workers) if pending[w]),
                     key=lambda w: clock[w] + pending[w][0])
        clock[worker] += pending[worker].popleft()
        hand_out(worker)
    return clock


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--not-built", dest="built", action="store_false",
                        help="the order of a machine whose control planes are not built yet")
    parser.add_argument("--built", dest="built", action="store_true", default=True)
    args = parser.parse_args(argv)
    plugin = Units(args.built)
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(REPO / "tests")],
                       plugins=[plugin])
    if code != 0:
        return int(code)
    times = seconds_by_test(args.junit)
    ends = replay([[times.get(nodeid, 0.0) for nodeid in tests]
                   for tests in plugin.units.values()])
    print(f"{len(plugin.units)} units; the processes end at "
          + ", ".join(f"{end:.0f} s" for end in ends))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
