"""What the benchmarks measured by a pytest case share (bench/files_bench.py, bench/ssh_bench.py):
the case (bench/<name>_case.py, standing on an end-to-end test's own fixtures) run in a pytest
process of its own, its parameters handed over in an environment variable (JSON, with `out`, the
file it writes its figures to), and the figures read back with the machine and its load
average (at the start and the end) added.

    figures = run_case("bench/files_bench_case.py", "FILES_BENCH", {"size_mib": 1024, ...})
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


class CaseFailed(Exception):
    """The case's pytest failed or wrote no figures."""


def run_case(case: str, variable: str, params: dict[str, Any], *,
             test: str | None = None) -> dict[str, Any]:
    """Run `case` (a path from the repo root; `test`: only that test of it) with `params` in
    the environment variable `variable`; its figures, with `load_average` and `machine`."""
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-case-") as tmp:
        out = Path(tmp) / "figures.json"
        done = subprocess.run(
            # -p tests.conftest: the suite's fixtures; the case imports those that override
            # pytest-django's, as a plugin would come before pytest-django's
            [sys.executable, "-m", "pytest", f"{case}::{test}" if test else case, "-p", "tests.conftest", "-p",
             "no:cacheprovider", "-n", "0", "-s", "-q", "--basetemp", f"{tmp}/pytest"],
            cwd=REPO, env={**os.environ, variable: json.dumps({**params, "out": str(out)})})
        if done.returncode != 0 or not out.exists():
            raise CaseFailed(f"the measurement failed (pytest exit status {done.returncode})")
        figures: dict[str, Any] = json.loads(out.read_text())
    figures["load_average"] = {"start": load_start, "end": os.getloadavg()}
    figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "processor": platform.processor() or platform.machine()}
    return figures


def write_figures(figures: dict[str, Any], path: str | None) -> None:
    """Print the figures (JSON) and, where asked, write them to `path` too."""
    print(json.dumps(figures, indent=1))
    if path:
        Path(path).write_text(json.dumps(figures, indent=1))
