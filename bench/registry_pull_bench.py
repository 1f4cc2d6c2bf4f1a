"""What the registry check adds to a launch: credentials.pulls.resolve against the tests' real
private registry (CNCF Distribution on loopback, stack/registry.py), in both logins, for each
answer the launch acts on.

    .venv/bin/python bench/registry_pull_bench.py --calls 50

Starts a registry of each kind under a temporary folder (the binary built first if missing:
`python -m stack.k8s.build distribution`), pushes one image, and times `--calls` checks of
each case: the image resolved, a wrong password, an image the account may not read (token
login), a missing tag. Each check is a fresh handshake, as each launch is (no token is kept
between launches). Prints p50/p95/max in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()

    from credentials.pulls import Login, resolve
    from tests.support.registry import OTHER_USER, TEAM_USER, _registry, push_image

    class Folders:
        def mktemp(self, name: str) -> Path:
            return Path(tempfile.mkdtemp(prefix=f"{name}-"))

    print(f"{'login':9} {'case':18} {'outcome':22} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}")
    for auth in ("htpasswd", "token"):
        started = time.monotonic()
        fixture = _registry(Folders(), auth)
        registry = next(fixture)
        print(f"# {auth} registry up in {time.monotonic() - started:.2f} s")
        push_image(registry, "team/app")
        image = f"{registry.host}/team/app"
        cases = {
            "resolved": (f"{image}:v1", Login("team", TEAM_USER, registry.passwords[TEAM_USER])),
            "wrong password": (f"{image}:v1", Login("team", TEAM_USER, "wrong")),
            "missing tag": (f"{image}:nope",
                            Login("team", TEAM_USER, registry.passwords[TEAM_USER])),
        }
        if auth == "token":
            cases["not readable"] = (f"{image}:v1",
                                     Login("other", OTHER_USER, registry.passwords[OTHER_USER]))
        for case, (ref, login) in cases.items():
            times, outcome = [], ""
            for _ in range(args.calls):
                begun = time.perf_counter()
                check = resolve(ref, login, timeout=5)
                times.append((time.perf_counter() - begun) * 1000)
                outcome = check.code or check.outcome
            times.sort()
            p95 = times[max(0, int(len(times) * 0.95) - 1)]
            print(f"{auth:9} {case:18} {outcome:22} {statistics.median(times):7.1f} "
                  f"{p95:7.1f} {times[-1]:7.1f}")
        next(fixture, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
