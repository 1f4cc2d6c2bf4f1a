#!/usr/bin/env python
"""Time-sliced GPUs at scale on kubesim: 64 notebooks on 16 time-sliced T4s admitted and
running, and the capacity read (`GET /api/v1/gpu-types/`, the launch check, and
cluster/capacity.py's `gpu_capacity()` itself) with 100, 1,000 and 10,000 shared units.

    .venv/bin/python bench/shared_gpu_bench.py [--sizes 100,1000,10000] [--requests 200]
    .venv/bin/python bench/shared_gpu_bench.py fill [--notebooks 64]

Each run starts the demo's configuration (stack/demo_stack.py: Keystone, Redis, kubesim,
SQLite, gunicorn, worker, tracker, beat) on a temporary folder, with an inventory this
benchmark writes: the demo's, its time-sliced pool (`gputype=t4-shared`, T4s shared four ways,
renamed `nvidia.com/gpu.shared`: the GPU type `t4-shared`) resized.

- `fill`: 4 nodes × 4 T4s × 4 replicas = 64 units on 16 GPUs. As the admin, vision-lab's quota
  becomes 64 `t4-shared` units and 16 GPUs in all; as the researcher (a Keystone token, the
  REST API), `--notebooks` Jupyter launches of one unit each are POSTed at once; timed to the
  last one `running`. Then: the type's free units, where the pods were bound, and two launches
  more: a 65th quarter (past the type's quota) and a whole T4 (within its own quota of one,
  past the total of 16 GPUs that the 64 quarters fill): both 403 quota_exceeded.
- `one --units N` (each size in a child process): the pool is N/100 nodes of 25 T4s × 4
  replicas, half of the units held by Running pods written into kubesim's state file (bound
  to those nodes, none of them the portal's), so capacity and free are both read. The
  researcher is logged in through the login form and the requests are made in this process
  with Django's test client, so every request the portal's own connection sends to kubesim
  is counted (a warm read should send none); 5 warm-up requests per path, then `--requests`
  timed. The parent prints each size and the p50 ratio of the largest to the smallest (goal
  ≤ 1.2).

The inventory is given to the demo's processes by setting stack.demo.INVENTORY in the child
process before the stack starts (the demo reads it when it builds kubesim's command line).
Results: bench/results/shared_gpus.md.
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
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.portal_reads import get_ok, namespace_entry, signed_in_portal, timed  # noqa: E402

NAMESPACE = "bench-shared"
POOL = "t4-shared"
PREFIX = "gpu-t4-shared-"
REPLICAS = 4
# 25 T4s × 4 replicas: 100 units a node, so 10,000 units are 100 nodes (kubesim gives each
# node a /24 of 10.244.0.0/16: at most 255 nodes)
GPUS_PER_NODE = 25
SLUG = "t4-shared"
RESOURCE = "nvidia.com/gpu.shared"
PATHS = {
    "gpu_types_api": ("/api/v1/gpu-types/", {}),
    "launch_check": (f"/workloads/new/check/?gpu_type={SLUG}&gpu_count=1",
                     {"HTTP_HX_REQUEST": "true"}),
}
TIMEOUT = 300.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def inventory(root: Path, *, nodes: int, gpus_per_node: int) -> Path:
    """The demo inventory with its time-sliced pool resized; written under `root`."""
    from stack import demo

    spec = yaml.safe_load(demo.INVENTORY.read_text())
    pool = next(p for p in spec["nodePools"] if p["name"] == POOL)
    pool["count"] = nodes
    pool["gpu"]["count"] = gpus_per_node
    assert pool["gpu"]["sharing"]["replicas"] == REPLICAS
    path = root / "inventory.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def start_stack(root: Path, inventory_path: Path, state: dict | None = None):
    from stack import demo
    from stack.demo_stack import DemoStack

    demo.INVENTORY = inventory_path  # read when the demo builds kubesim's command line
    stack = DemoStack(root)
    if state is not None:
        (stack.layout.root / "kubesim-state.json").write_text(json.dumps(state))
    stack.start()
    return stack


def state_with_holders(count: int, nodes: int, per_node: int) -> dict:
    """kubesim's state file: `count` Running pods, one shared unit each, bound to the pool's
    nodes (at most `per_node` on each)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    objects = [namespace_entry(NAMESPACE, now)]
    for i in range(count):
        node = f"{PREFIX}{i // per_node % nodes + 1}"
        objects.append({"resource": ["", "v1", "pods"], "object": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"holder-{i}", "namespace": NAMESPACE, "uid": str(uuid.uuid4()),
                         "resourceVersion": str(i + 2), "creationTimestamp": now,
                         "labels": {"app": "holder"}},
            "spec": {"nodeName": node, "restartPolicy": "Always",
                     "nodeSelector": {"gputype": SLUG},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "busybox", "resources": {
                         "requests": {"cpu": "10m", RESOURCE: "1"},
                         "limits": {RESOURCE: "1"}}}]},
            "status": {"phase": "Running", "startTime": now}}})
    return {"resourceVersion": count + 2, "objects": objects}


def one(units: int, requests: int, profile: bool = False) -> dict[str, Any]:
    per_node = GPUS_PER_NODE * REPLICAS
    if units % per_node:
        raise SystemExit(f"--units must be a multiple of {per_node}")
    nodes, held = units // per_node, units // 2
    root = Path(tempfile.mkdtemp(prefix=f"shared-bench-{units}-"))
    path = inventory(root, nodes=nodes, gpus_per_node=GPUS_PER_NODE)
    started = time.monotonic()
    stack = start_stack(root, path, state_with_holders(held, nodes, per_node))
    figures: dict[str, Any] = {"units": units, "nodes": nodes, "held_by_pods": held,
                               "stack_start_s": round(time.monotonic() - started, 1)}
    try:
        os.environ.update(stack.env)
        import django

        django.setup()
        from cluster.cache import cluster_cache
        from cluster.capacity import capacity_by_type, gpu_capacity, gpu_types

        client, calls = signed_in_portal()
        assert client.get(PATHS["gpu_types_api"][0]).status_code == 200  # starts the read model
        cache = cluster_cache()
        assert cache.pods.wait_synced(TIMEOUT) and cache.nodes.wait_synced(TIMEOUT)
        figures["pods_in_cache"] = len(cache.pods)
        figures["nodes_in_cache"] = len(cache.nodes)

        versions = (cache.nodes.version, cache.pods.version)
        for name, (path, headers) in PATHS.items():
            figures[name] = timed(get_ok(client, path, headers), requests, calls=calls)
            outside = [c for c in calls if "watch=true" not in c]
            figures[name]["cluster_calls_per_request"] = len(outside) / requests
        if profile:  # where a warm GET gpu-types/ spends its time, to stderr
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.runcall(timed, get_ok(client, *PATHS["gpu_types_api"]), requests)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        figures["gpu_capacity"] = timed(gpu_capacity, requests, calls=calls)
        figures["gpu_capacity"]["cluster_calls_per_request"] = len(
            [c for c in calls if "watch=true" not in c]) / requests
        # the capacity view is memoised on these: moved, it was computed again meanwhile
        figures["read_model_changes_while_timed"] = (
            cache.nodes.version - versions[0], cache.pods.version - versions[1])
        t0 = time.perf_counter()
        capacity_by_type(gpu_types(), cache.nodes.items(), cache.pods.items(), {})
        figures["capacity_computed_afresh_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        row = next(r for r in client.get(PATHS["gpu_types_api"][0]).json()
                   if r["slug"] == SLUG)
        figures["row"] = {k: row[k] for k in ("capacity", "free", "sharing", "gpu_fraction_text")}
        assert (row["capacity"], row["free"]) == (units, units - held), row
    finally:
        stack.close()
    return figures


def fill(count: int) -> dict[str, Any]:
    from kubernetes import client as k8s
    from kubernetes import config

    from stack.burst import PASSWORD, PROJECT, USER, Portal, _states, all_at_once, keystone_token
    from stack.keystone import ADMIN_PASSWORD

    root = Path(tempfile.mkdtemp(prefix="shared-fill-"))
    path = inventory(root, nodes=4, gpus_per_node=4)  # 16 T4s, 64 units
    stack = start_stack(root, path)
    figures: dict[str, Any] = {"notebooks": count, "gpus": 16, "units": 16 * REPLICAS}
    admin = Portal(stack.url, keystone_token(stack.keystone.url, "admin", ADMIN_PASSWORD, "admin"))
    researcher = Portal(stack.url, keystone_token(stack.keystone.url, USER, PASSWORD, PROJECT))
    try:
        tenants = admin.timed("GET", "/tenants/", params={"name": PROJECT})["body"]
        tenant = next(t for t in tenants["results"] if t["name"] == PROJECT)
        answer = admin.timed("PATCH", f"/tenants/{tenant['id']}/quota/", json={
            "gpus_total": 16, "gpus_by_type": {SLUG: count, "a100": 0, "v100": 0, "t4": 1,
                                               "a100-1g-10gb": 0},
            "cpu": 2 * count, "memory": 4 * count, "max_workloads": count + 2})
        assert answer["status"] == 200, answer
        core = k8s.CoreV1Api(config.new_client_from_config(config_file=str(stack.kubeconfig)))
        deadline = time.monotonic() + TIMEOUT
        while True:
            hard = {k: v for q in core.list_namespaced_resource_quota(tenant["namespace"]).items
                    for k, v in ((q.spec.hard if q.spec else None) or {}).items()}
            if hard.get(f"requests.{RESOURCE}") == str(count):
                break
            assert time.monotonic() < deadline, hard
            time.sleep(0.2)
        launch = {"template": "jupyter", "gpu_type": SLUG, "gpu_count": 1, "cpu": 1,
                  "memory": 2}
        started_wall, started = time.time(), time.monotonic()
        answers = all_at_once([lambda i=i: researcher.timed("POST", "/workloads/", json={
            **launch, "name": f"shared {i}"}) for i in range(count)], 16)
        figures["answered_s"] = round(time.monotonic() - started, 2)
        ids = [a["body"]["id"] for a in answers if a["status"] == 201]
        assert len(ids) == count, [(a["status"], a["body"]) for a in answers if a["status"] != 201]
        while True:
            states = _states(researcher, ids)
            if len(states) == count and all(s == "running" for s in states.values()):
                break
            assert time.monotonic() - started < TIMEOUT, states
            time.sleep(0.5)
        figures["all_running_s"] = round(time.time() - started_wall, 2)
        rows = researcher.timed("GET", "/gpu-types/")["body"]
        row = next(r for r in rows if r["slug"] == SLUG)
        figures["t4_shared_after"] = {k: row[k] for k in ("capacity", "free")}
        # one more quarter (past the type's 64 units), and a whole T4 (within its own quota
        # of 1, past the total: 64 quarters are the 16 GPUs of the total)
        for name, body in (("one_more_quarter", launch),
                           ("one_whole_t4", {**launch, "gpu_type": "t4"})):
            extra = researcher.timed("POST", "/workloads/", json={**body, "name": name})
            figures[name] = {"status": extra["status"], "code": extra["code"],
                             "detail": (extra["body"] or {}).get("detail")}
        nodes = {}
        for pod in core.list_namespaced_pod(tenant["namespace"]).items:
            if pod.spec.node_name:
                nodes[pod.spec.node_name] = nodes.get(pod.spec.node_name, 0) + 1
        figures["pods_per_node"] = dict(sorted(nodes.items()))
        for wid in ids:
            researcher.timed("DELETE", f"/workloads/{wid}/")
    finally:
        admin.close()
        researcher.close()
        stack.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="all", choices=("all", "one", "fill"))
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--notebooks", type=int, default=64)
    parser.add_argument("--profile", action="store_true",
                        help="one: print where GET gpu-types/ spends its time (cProfile)")
    args = parser.parse_args()
    if args.mode == "one":
        print(json.dumps(one(args.units, args.requests, args.profile)))
        return
    if args.mode == "fill":
        print(json.dumps(fill(args.notebooks)))
        return
    results = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        log(f"{size} shared units, load average {os.getloadavg()[0]:.2f}")
        out = subprocess.run([sys.executable, __file__, "one", "--units", str(size),
                              "--requests", str(args.requests)], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout
        results[size] = json.loads(out.strip().splitlines()[-1])
        print(f"{size} units: {json.dumps(results[size])}", flush=True)
    small, large = min(results), max(results)
    names = [*PATHS, "gpu_capacity"]
    print(json.dumps({"sizes": sorted(results), "p50_ratio_largest_to_smallest": {
        name: round(results[large][name]["p50_ms"] / results[small][name]["p50_ms"], 2)
        for name in names}, "cpu_p50_ratio_largest_to_smallest": {
        name: round(results[large][name]["cpu_p50_ms"] / results[small][name]["cpu_p50_ms"], 2)
        for name in names}}))


if __name__ == "__main__":
    main()
