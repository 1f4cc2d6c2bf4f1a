"""The measurement of bench/ssh_bench.py, run as a pytest case so that it stands on the SSH
end-to-end test's own fixtures (tests/access/test_ssh_end_to_end.py: the real gpu-portal-sshd
wrapping the workload's program, the real oauth2-proxy in front of it, the live portal with its
real Keystone signing the certificates). Not part of the suite (`testpaths` is tests/); the
parameters and the output file come in the environment variable SSH_BENCH (JSON).

Two ways to the same server, with the same OpenSSH client, key and certificate:

- through the proxy: the Host block of `gpuctl ssh-config`, its ProxyCommand `gpuctl ssh-proxy`
  (the certificate checked, a bearer token from the portal, a WebSocket through oauth2-proxy);
- direct: the same block, its ProxyCommand the same WebSocket relay
  (`python -m gpuctl.ssh_transport`) straight to the server's loopback port, no proxy, no token
  (the server speaks SSH over a WebSocket only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from access.ssh_server import SSH_PATH

# the fixtures: those of tests/conftest.py that override pytest-django's are imported here, as
# a plugin (-p tests.conftest, which brings the rest) would come before pytest-django's
from tests.access.conftest import issuer  # noqa: F401
from tests.access.test_ssh_end_to_end import gpuctl, gpuctl_env
from tests.access.test_ssh_end_to_end import ssh_workload as ssh_workload  # noqa: F401
from tests.fixtures.database import django_db_setup  # noqa: F401
from tests.fixtures.stack import django_db_modify_db_settings  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(3600)]

WAYS = ("proxy", "direct")


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=900)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr.decode()
    return elapsed


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"p50": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "min": ordered[0], "max": ordered[-1], "n": len(ordered)}


def test_ssh_bench(ssh_workload, keystone, live_server, tmp_path):
    params = json.loads(os.environ["SSH_BENCH"])
    env = gpuctl_env(keystone, live_server, tmp_path)
    workload_id = str(ssh_workload.workload.pk)
    alias = f"gpu-portal-{workload_id}"
    configs = {"proxy": tmp_path / "proxy.config", "direct": tmp_path / "direct.config"}
    done = gpuctl(env, "ssh-config", workload_id, "--write", str(configs["proxy"]))
    assert done.returncode == 0, done.stderr.decode()
    straight = (f"{sys.executable} -m gpuctl.ssh_transport "
                f"ws://127.0.0.1:{ssh_workload.proxy.spec.ssh_port}{SSH_PATH}")
    configs["direct"].write_text(re.sub(r"(?m)^(\s*ProxyCommand\s+).*$",
                                        lambda m: m.group(1) + straight,
                                        configs["proxy"].read_text()))
    ssh = {way: ["ssh", "-F", str(configs[way]), "-o", "BatchMode=yes", alias] for way in WAYS}
    scp = {way: ["scp", "-F", str(configs[way]), "-q", "-o", "BatchMode=yes"] for way in WAYS}

    # set-up: `ssh HOST true` (connection, authentication, a command), the ways interleaved
    setup: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(params["connections"]):
        for way in WAYS:
            setup[way].append(_timed([*ssh[way], "true"], env))
    print(f"set-up p50: proxy {statistics.median(setup['proxy']):.3f} s, direct "
          f"{statistics.median(setup['direct']):.3f} s", flush=True)

    # throughput: scp of a random file up and down, each run both ways through each way
    size = params["size_mb"] * 1_000_000
    source = tmp_path / "source.bin"
    with source.open("wb") as f:
        for _ in range(params["size_mb"]):
            f.write(os.urandom(1_000_000))
    digest = _digest(source)
    mb_s: dict[str, dict[str, list[float]]] = {d: {way: [] for way in WAYS}
                                               for d in ("upload", "download")}
    for run in range(params["runs"]):
        for way in WAYS:
            remote = ssh_workload.app_dir / f"{way}.bin"
            up = _timed([*scp[way], str(source), f"{alias}:{remote.name}"], env)
            assert remote.stat().st_size == size
            back = tmp_path / f"{way}.bin"
            down = _timed([*scp[way], f"{alias}:{remote.name}", str(back)], env)
            assert _digest(back) == digest, f"{way}: the file came back different"
            remote.unlink()
            back.unlink()
            mb_s["upload"][way].append(params["size_mb"] / up)
            mb_s["download"][way].append(params["size_mb"] / down)
            print(f"run {run + 1} {way}: up {params['size_mb'] / up:.1f} MB/s, down "
                  f"{params['size_mb'] / down:.1f} MB/s", flush=True)

    figures: dict = {"connections": params["connections"], "size_mb": params["size_mb"],
                     "runs": params["runs"], "setup_s": {way: _summary(setup[way])
                                                         for way in WAYS}}
    figures["setup_s"]["ratio_p50"] = (figures["setup_s"]["proxy"]["p50"]
                                       / figures["setup_s"]["direct"]["p50"])
    for direction, values in mb_s.items():
        medians = {way: statistics.median(values[way]) for way in WAYS}
        figures[f"{direction}_mb_s"] = {**medians, "ratio": medians["proxy"] / medians["direct"],
                                        "all": values}
    ratios = [figures["upload_mb_s"]["ratio"], figures["download_mb_s"]["ratio"]]
    figures["goal"] = {"throughput_ratio_min": params["goal"],
                       "met": min(ratios) >= params["goal"]}
    figures["client"] = subprocess.run(["ssh", "-V"], capture_output=True,
                                       text=True).stderr.strip()
    Path(params["out"]).write_text(json.dumps(figures, indent=1))
