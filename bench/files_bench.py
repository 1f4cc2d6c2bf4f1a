"""Files benchmark (not part of the test suite): a 1 GiB upload and download through the
portal's forwarding path against the same straight to the file server.

Everything real, on loopback (the measurement is bench/files_bench_case.py, a pytest case):

- --web gunicorn (the default): the portal as deployed, gunicorn with the image's
  configuration, on the demo's own configuration (stack/demo_stack.py, as tests/demo/
  test_files.py runs it): a volume made through the API and bound by kubesim, its project's
  file server started in kubesim and run, the real gpu-portal-files, by the demo's files
  process (stack/demo_files.py). The upload is spliced from the client's socket;
- --web live_server: as tests/files/test_end_to_end.py runs it, the portal in pytest-django's
  live_server (Django's threaded server, which hands no socket over: the upload is read through
  the interpreter), the real gpu-portal-files serving a folder on loopback.

- through the portal: PUT/GET /api/v1/volumes/{id}/files/content, the user's Keystone token;
- direct: PUT/GET /v1/volumes/{claim}/content on the server's port, its bearer token.

The same client both ways (curl, in a process of its own); a random file of --size-mib MiB up,
then down, --runs times, the two ways interleaved; MiB/s = size / wall time of the request;
medians; the SHA-256 of the file on the volume and of the one downloaded checked against the
source each time. Ratio = portal / direct.

Goal: ≥ 0.5 × direct, both directions.

Usage: .venv/bin/python bench/files_bench.py [--size-mib 1024] [--runs 3]
                                             [--web gunicorn|live_server] [--json out]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.case_runner import CaseFailed, run_case, write_figures  # noqa: E402

GOAL = 0.5
# the portal's web server: the measurement (bench/files_bench_case.py) that runs it
WEB = {"gunicorn": "test_files_throughput_on_the_demo", "live_server": "test_files_throughput"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--web", choices=WEB, default="gunicorn",
                        help="the portal's web server (default: gunicorn, as deployed)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    try:
        figures = run_case("bench/files_bench_case.py", "FILES_BENCH",
                           {"size_mib": args.size_mib, "runs": args.runs, "goal": GOAL},
                           test=WEB[args.web])
    except CaseFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    for name in ("upload", "download"):
        f = figures[f"{name}_mib_s"]
        print(f"{args.size_mib} MiB {name}, median of {args.runs}: portal {f['portal']:.1f} "
              f"MiB/s, direct {f['direct']:.1f} MiB/s, ratio {f['ratio']:.2f}")
    print(f"checksums equal: {figures['checksums_equal']}; goal ≥ {GOAL}: "
          f"{'met' if figures['goal']['met'] else 'not met'}")
    write_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
