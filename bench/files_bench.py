"""Files benchmark (not part of the test suite): a 1 GiB upload and download through the
portal's forwarding path against the same straight to the file server.

Everything real, on loopback, as tests/files/test_end_to_end.py runs it (the measurement is
bench/files_bench_case.py, a pytest case on that test's fixtures): the live portal with its
Keystone, the project's file server started in kubesim (its Deployment awaited until ready) and
the real gpu-portal-files (filesd/, built by stack.k8s.build) serving a folder on loopback.

- through the portal: PUT/GET /api/v1/volumes/{id}/files/content, the user's Keystone token;
- direct: PUT/GET /v1/volumes/{claim}/content on the server's port, its bearer token.

The same client both ways (curl, in a process of its own); a random file of --size-mib MiB up,
then down, --runs times, the two ways interleaved; MiB/s = size / wall time of the request;
medians; the SHA-256 of the file on the volume and of the one downloaded checked against the
source each time. Ratio = portal / direct.

Goal: ≥ 0.5 × direct, both directions.

Usage: .venv/bin/python bench/files_bench.py [--size-mib 1024] [--runs 3] [--json out]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="files-bench-") as tmp:
        out = Path(tmp) / "figures.json"
        params = {"size_mib": args.size_mib, "runs": args.runs, "goal": GOAL, "out": str(out)}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "bench/files_bench_case.py", "-p", "tests.conftest",
             "-p", "no:cacheprovider", "-n", "0", "-s", "-q", "--basetemp", f"{tmp}/pytest"],
            cwd=REPO, env={**os.environ, "FILES_BENCH": json.dumps(params)})
        if done.returncode != 0 or not out.exists():
            print(f"the measurement failed (pytest exit status {done.returncode})",
                  file=sys.stderr)
            return 1
        figures = json.loads(out.read_text())
    figures["load_average"] = {"start": load_start, "end": os.getloadavg()}
    figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "processor": platform.processor() or platform.machine()}
    for name in ("upload", "download"):
        f = figures[f"{name}_mib_s"]
        print(f"{args.size_mib} MiB {name}, median of {args.runs}: portal {f['portal']:.1f} "
              f"MiB/s, direct {f['direct']:.1f} MiB/s, ratio {f['ratio']:.2f}")
    print(f"checksums equal: {figures['checksums_equal']}; goal ≥ {GOAL}: "
          f"{'met' if figures['goal']['met'] else 'not met'}")
    print(json.dumps(figures, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
