"""The conformance score: how many checks kubesim and a real API server agree on.

A check is a test of tests/conformance that takes the `cluster` fixture: it runs once per
cluster. It agrees when it passes on both. A check marked `@known_difference(reason)` is
expected to fail on kubesim (xfail strict: it must fail there, or the marker goes) and must
still pass on the real cluster; kubesim/README.md lists these.

    python -m tests.conformance.score                 # the score, counted from the suite
    python -m tests.conformance.score --write-readme  # rewrite kubesim/README.md's section
    python -m tests.conformance.score --check-readme  # exit 1 if that section is stale

The count comes from collecting the suite (the markers); a green `pytest tests/conformance`
on both clusters is what proves it. Every pytest run of the suite also prints the score it
observed (the Tally plugin).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).resolve().parent
README = REPO / "kubesim" / "README.md"
KNOWN_DIFFERENCE = "known_difference"


def known_difference(reason: str) -> pytest.MarkDecorator:
    """Mark a check kubesim is known to fail, for `reason` (kubesim/README.md lists them)."""
    return getattr(pytest.mark, KNOWN_DIFFERENCE)(reason=reason)


def check_id(item_or_nodeid: pytest.Item | str) -> tuple[str, str | None]:
    """(the check without its cluster parameter, the cluster) of a test node id:
    `f.py::test_x[kubesim]` -> (`f.py::test_x`, "kubesim"),
    `f.py::test_y[kube-in]` -> (`f.py::test_y[in]`, "kube")."""
    nodeid = item_or_nodeid if isinstance(item_or_nodeid, str) else item_or_nodeid.nodeid
    match = re.fullmatch(r"(.*?)\[(.*)\]", nodeid)
    if not match:
        return nodeid, None
    parts = match.group(2).split("-")
    for cluster in ("kubesim", "kube"):
        if cluster in parts:
            parts.remove(cluster)
            rest = "-".join(parts)
            return match.group(1) + (f"[{rest}]" if rest else ""), cluster
    return nodeid, None


@dataclass
class Score:
    checks: list[str]
    differences: dict[str, str]  # check -> reason

    @property
    def agree(self) -> int:
        return len(self.checks) - len(self.differences)

    def line(self) -> str:
        return f"{self.agree} of {len(self.checks)} checks agree"


class Collector:
    """A pytest plugin that records the checks and their known-difference markers."""

    def __init__(self) -> None:
        self.checks: dict[str, str | None] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            check, cluster = check_id(item)
            if cluster is None:
                continue
            marker = item.get_closest_marker(KNOWN_DIFFERENCE)
            self.checks[check] = marker.kwargs["reason"] if marker else None


def collect() -> Score:
    collector = Collector()
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", str(SUITE)],
                           plugins=[collector])
    if code != pytest.ExitCode.OK:
        raise SystemExit(f"collecting {SUITE} failed ({code}):\n{output.getvalue()}")
    checks = sorted(collector.checks)
    return Score(checks, {c: r for c, r in collector.checks.items() if r})


README_START = "<!-- conformance score: written by `python -m tests.conformance.score --write-readme` -->"
README_END = "<!-- end of conformance score -->"


def readme_section(score: Score) -> str:
    lines = [README_START,
             f"**{score.agree} of {len(score.checks)} checks agree** (checks in "
             "`tests/conformance/`, each run against kubesim and the real control plane).",
             ""]
    by_reason: dict[str, list[str]] = defaultdict(list)
    for check, reason in sorted(score.differences.items()):
        by_reason[reason].append(check.removeprefix("tests/conformance/"))
    for reason, checks in by_reason.items():
        lines.append(f"- {reason}. Checks: " + ", ".join(f"`{c}`" for c in checks) + ".")
    lines.append(README_END)
    return "\n".join(lines)


def readme_with(score: Score, text: str) -> str:
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < 0:
        raise SystemExit(f"{README} has no conformance section (markers {README_START!r})")
    return text[:start] + readme_section(score) + text[end + len(README_END):]


@dataclass(eq=False)  # a plugin must be hashable
class Tally:
    """pytest plugin (registered by tests/conformance/conftest.py): the observed score."""

    outcomes: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        check, cluster = check_id(report.nodeid)
        if cluster is None:
            return
        if report.when == "call" or report.outcome != "passed":
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.outcome == "skipped" else "xpassed"
            else:
                outcome = report.outcome
            # the first non-pass wins (a setup error stays an error)
            if self.outcomes[check].get(cluster) in (None, "passed"):
                self.outcomes[check][cluster] = outcome

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.outcomes:
            return
        ran = {cl for per in self.outcomes.values() for cl in per}
        total = len(self.outcomes)
        if ran == {"kube"}:
            passed = sum(per.get("kube") == "passed" for per in self.outcomes.values())
            line = f"conformance: {passed} of {total} checks pass on the real cluster (alone)"
        else:
            both = "kube" in ran
            agree = differ = 0
            for per in self.outcomes.values():
                kube_ok = not both or per.get("kube") == "passed"
                if per.get("kubesim") == "passed" and kube_ok:
                    agree += 1
                elif per.get("kubesim") == "xfailed" and kube_ok:
                    differ += 1
            against = "the real cluster" if both else "the recorded facts (no real cluster ran)"
            line = (f"conformance of kubesim vs {against}: {agree} of {total} checks agree, "
                    f"{differ} known differences")
        terminalreporter.write_sep("=", line)


def main(argv: list[str]) -> int:
    score = collect()
    print(f"conformance: {score.line()}")
    for check, reason in sorted(score.differences.items()):
        print(f"  known difference: {check}: {reason}")
    text = README.read_text()
    if "--write-readme" in argv:
        README.write_text(readme_with(score, text))
        print(f"wrote {README.relative_to(REPO)}")
    elif "--check-readme" in argv and readme_with(score, text) != text:
        print(f"{README.relative_to(REPO)} is stale: run python -m tests.conformance.score "
              "--write-readme", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


SSA_DIFFERENCE = known_difference(
    "server-side apply is a strategic merge patch in kubesim: it keeps no managedFields, so "
    "there is no field ownership (no conflicts between managers, fields a manager stops "
    "applying are not removed)")
