"""SSH benchmark (not part of the test suite): connection set-up time and scp
throughput through the workload's authenticating proxy against the same straight to the server.

Everything real, on loopback, as tests/access/test_ssh_end_to_end.py runs it (the measurement is
bench/ssh_bench_case.py, a pytest case on that test's fixtures): the live portal with its
Keystone signing a short-lived certificate, gpu-portal-sshd (sshd/, built by stack.k8s.build)
wrapping the workload's program, oauth2-proxy in front of it, and Debian's OpenSSH client.

- through the proxy: `ssh`/`scp` with the Host block of `gpuctl ssh-config`, its ProxyCommand
  `gpuctl ssh-proxy ID` (a bearer token from the portal, a WebSocket through oauth2-proxy);
- direct: the same client, key and certificate, its ProxyCommand the same WebSocket relay
  (`python -m gpuctl.ssh_transport`) straight to the server's port.

Set-up: wall time of `ssh HOST true` (connect, authenticate, run a command), --connections
times each way, interleaved. Throughput: `scp` (OpenSSH 9: the SFTP protocol) of a random file
of --size-mb MB (10^6 bytes) up and down, --runs times each way, interleaved; MB/s = size / wall
time of the scp command; medians. Ratio = proxy / direct.

Goal: throughput through the proxy ≥ 0.5 × direct, both directions.

Usage: .venv/bin/python bench/ssh_bench.py [--size-mb 200] [--runs 3] [--connections 10]
                                           [--json out]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.case_runner import CaseFailed, run_case, write_figures  # noqa: E402

GOAL = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    try:
        figures = run_case("bench/ssh_bench_case.py", "SSH_BENCH",
                           {"size_mb": args.size_mb, "runs": args.runs,
                            "connections": args.connections, "goal": GOAL})
    except CaseFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    s, up, down = figures["setup_s"], figures["upload_mb_s"], figures["download_mb_s"]
    print(f"set-up p50 over {args.connections}: proxy {s['proxy']['p50'] * 1000:.0f} ms, "
          f"direct {s['direct']['p50'] * 1000:.0f} ms ({s['ratio_p50']:.2f}×)")
    for name, f in (("upload", up), ("download", down)):
        print(f"scp {args.size_mb} MB {name}, median of {args.runs}: proxy {f['proxy']:.1f} "
              f"MB/s, direct {f['direct']:.1f} MB/s, ratio {f['ratio']:.2f}")
    print(f"goal ≥ {GOAL}: {'met' if figures['goal']['met'] else 'not met'}")
    write_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
