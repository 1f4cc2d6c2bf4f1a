#!/usr/bin/env python
"""What `cluster_objects_of_the_test` (tests/support/cluster.py) costs a test that makes nothing.

    .venv/bin/python bench/cluster_objects_bench.py [--repeats 200] [--against REV]

One kubesim (the tests' timings, the demo inventory) is started; the wrapper is entered and
left around an empty block `--repeats` times, and with `--against` that revision's version of
tests/support/cluster.py (from git) as well, the two interleaved. Prints the mean and median
milliseconds of each. Every test with a cluster (`cluster`, `queued_cluster`) pays this.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--against", help="a git revision whose wrapper is timed beside")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    import tests.support.cluster as current
    from tests.fixtures.kubesim import DEMO_INVENTORY, KubesimServer

    versions = {"this tree": current}
    with tempfile.TemporaryDirectory(prefix="cluster-objects-bench-") as folder:
        if args.against:
            source = Path(folder) / "cluster_then.py"
            source.write_bytes(subprocess.run(
                ["git", "show", f"{args.against}:tests/support/cluster.py"], cwd=REPO,
                check=True, capture_output=True).stdout)
            spec = importlib.util.spec_from_file_location("cluster_then", source)
            assert spec is not None and spec.loader is not None
            then = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(then)
            versions[args.against] = then
        server = KubesimServer(Path(folder) / "kubesim", inventory=DEMO_INVENTORY)
        server.start()
        took: dict[str, list[float]] = {name: [] for name in versions}
        try:
            for _ in range(args.repeats):
                for name, module in versions.items():
                    started = time.perf_counter()
                    with module.cluster_objects_of_the_test(server.api_client, timeout=30):
                        pass
                    took[name].append(time.perf_counter() - started)
        finally:
            server.stop()
    for name, seconds in took.items():
        print(f"{name}: {len(seconds)} times, mean {1000 * statistics.mean(seconds):.1f} ms, "
              f"median {1000 * statistics.median(seconds):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
