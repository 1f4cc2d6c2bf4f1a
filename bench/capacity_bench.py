#!/usr/bin/env python
"""The cluster read model under many pods: GET /api/v1/gpu-types/, the launch page and its live
check with 100 pods in the cluster and with 50,000.

    .venv/bin/python bench/capacity_bench.py [--sizes 100,50000] [--requests 200]

For each size it starts the demo's configuration (stack/demo_stack.py: Keystone, Redis, kubesim
with the demo inventory, SQLite, web, worker, tracker, beat) on a temporary folder. The pods are
loaded the fastest honest way: written into kubesim's state file before it starts
(`--state-file`, which kubesim loads before it serves), bound to the two CPU nodes and Running,
none of them the portal's. The portal's requests are then made in this process with Django's
test client (the demo's environment, the researcher logged in through the real login form), so
that every HTTP request the portal's own connection sends to kubesim is counted (the ApiClient's
rest client, wrapped): once the read model is warm, a page or API answer should send none.

Each size runs in a child process (`capacity_bench.py one --pods N`), which prints its figures
as JSON; the parent prints both and the p50 ratio 50k/100 (goal ≤ 1.2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.portal_reads import get_ok, namespace_entry, signed_in_portal, timed  # noqa: E402

NAMESPACE = "bench-load"
CPU_NODES = ("cpu-1", "cpu-2")
PATHS = {
    "gpu_types_api": ("/api/v1/gpu-types/", {}),
    "launch_page": ("/workloads/new/", {}),
    "launch_check": ("/workloads/new/check/?gpu_type=a100&gpu_count=1", {"HTTP_HX_REQUEST": "true"}),
}


def state_with_pods(count: int) -> dict:
    """kubesim's state file: a namespace and `count` Running pods bound to the CPU nodes."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    objects = [namespace_entry(NAMESPACE, now)]
    for i in range(count):
        objects.append({"resource": ["", "v1", "pods"], "object": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"load-{i}", "namespace": NAMESPACE, "uid": str(uuid.uuid4()),
                         "resourceVersion": str(i + 2), "creationTimestamp": now,
                         "labels": {"app": "load"}},
            "spec": {"nodeName": CPU_NODES[i % 2], "restartPolicy": "Always",
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "10m"}}}]},
            "status": {"phase": "Running", "startTime": now}}})
    return {"resourceVersion": count + 2, "objects": objects}


def one(pods: int, requests: int) -> dict:
    from stack.demo_stack import DemoStack

    root = Path(tempfile.mkdtemp(prefix=f"capacity-bench-{pods}-"))
    stack = DemoStack(root)
    (stack.layout.root / "kubesim-state.json").write_text(json.dumps(state_with_pods(pods)))
    started = time.monotonic()
    stack.start()
    figures: dict = {"pods": pods, "stack_start_s": round(time.monotonic() - started, 1)}
    try:
        os.environ.update(stack.env)
        import django

        django.setup()
        from cluster.cache import cluster_cache

        client, calls = signed_in_portal()
        cold = time.perf_counter()
        assert client.get(PATHS["gpu_types_api"][0]).status_code == 200  # starts the read model
        figures["first_request_ms"] = round((time.perf_counter() - cold) * 1000, 1)
        cache = cluster_cache()
        synced = time.perf_counter()
        assert cache.pods.wait_synced(300) and cache.nodes.wait_synced(300)
        figures["first_sync_s"] = round(time.perf_counter() - cold, 2)
        figures["waited_for_sync_s"] = round(time.perf_counter() - synced, 2)
        figures["pods_in_cache"] = len(cache.pods)
        for name, (path, headers) in PATHS.items():
            figures[name] = timed(get_ok(client, path, headers), requests, calls=calls)
            outside = [c for c in calls if "watch=true" not in c]
            figures[name]["cluster_calls_per_request"] = len(outside) / requests
            figures[name]["watch_reopens"] = len(calls) - len(outside)
        figures["rows"] = client.get(PATHS["gpu_types_api"][0]).json()
        assert all(row["free"] is not None for row in figures["rows"]), figures["rows"]
    finally:
        stack.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="all", choices=("all", "one"))
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--sizes", default="100,50000")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    if args.mode == "one":
        print(json.dumps(one(args.pods, args.requests)))
        return
    results = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        out = subprocess.run([sys.executable, __file__, "one", "--pods", str(size),
                              "--requests", str(args.requests)], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout
        results[size] = json.loads(out.strip().splitlines()[-1])
        print(f"{size} pods: " + json.dumps({k: v for k, v in results[size].items()
                                             if k != "rows"}), flush=True)
    small, large = min(results), max(results)
    summary = {"sizes": [small, large], "p50_ratio": {
        name: round(results[large][name]["p50_ms"] / results[small][name]["p50_ms"], 2)
        for name in PATHS}, "cluster_calls_per_request": {
        name: max(r[name]["cluster_calls_per_request"] for r in results.values())
        for name in PATHS}}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
