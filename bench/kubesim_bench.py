"""kubesim benchmark (not part of the test suite).

Measures, against a kubesim subprocess over HTTP:
1. watch events/s delivered to 10 watchers while 50 concurrent clients create pods;
2. p50/p95 latency of a labelled pod list over 10,000 pods;
3. RSS of the kubesim process holding those 10,000 pods.

Usage: .venv/bin/python bench/kubesim_bench.py [--pods 10000] [--cluster]
By default kubesim runs with --no-cluster (API server and store only), so the numbers are
those of the API half; --cluster adds the demo inventory and the simulated controllers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"


def start_kubesim(cluster: bool) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [sys.executable, "-m", "kubesim", "--port", "0", "--log-level", "WARNING"]
    cmd += (
        ["--inventory", str(REPO / "deploy/kubesim/demo-inventory.yaml")]
        if cluster
        else ["--no-cluster"]
    )
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("kubesim listening on "):
        proc.kill()
        raise SystemExit(f"kubesim did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[-1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pod(name: str, group: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "group": f"g{group}"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
            ]
        },
    }


async def create_pods(
    session: aiohttp.ClientSession, url: str, names: list[str], clients: int
) -> float:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for n in names:
        queue.put_nowait(n)

    async def client() -> None:
        while not queue.empty():
            name = queue.get_nowait()
            idx = int(name.rsplit("-", 1)[-1])
            async with session.post(
                f"{url}/api/v1/namespaces/{NAMESPACE}/pods", json=pod(name, idx % 10)
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create {name}: {resp.status} {await resp.text()}")

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - t0


async def watcher(
    session: aiohttp.ClientSession,
    url: str,
    rv: str,
    expected: int,
    done: asyncio.Event,
    counts: list[int],
    index: int,
) -> None:
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "300"}
    async with session.get(
        f"{url}/api/v1/namespaces/{NAMESPACE}/pods",
        params=params,
        timeout=aiohttp.ClientTimeout(total=None),
    ) as resp:
        async for _line in resp.content:
            counts[index] += 1
            if counts[index] >= expected:
                break
    if all(c >= expected for c in counts):
        done.set()


async def bench_watch(url: str, pods: int, watchers: int, clients: int) -> dict:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods?limit=1") as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        counts = [0] * watchers
        done = asyncio.Event()
        tasks = [
            asyncio.create_task(watcher(session, url, rv, pods, done, counts, i))
            for i in range(watchers)
        ]
        await asyncio.sleep(0.5)  # watchers connected
        t0 = time.perf_counter()
        create_s = await create_pods(session, url, [f"w-{i}" for i in range(pods)], clients)
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=600)
        elapsed = time.perf_counter() - t0
    delivered = sum(counts)
    return {
        "pods_created": pods,
        "watchers": watchers,
        "clients": clients,
        "create_seconds": round(create_s, 2),
        "creates_per_s": round(pods / create_s),
        "events_delivered": delivered,
        "seconds": round(elapsed, 2),
        "events_per_s": round(delivered / elapsed),
    }


async def fill(url: str, total: int, already: int, clients: int) -> float:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await create_pods(session, url, [f"w-{i}" for i in range(already, total)], clients)


async def bench_list(url: str, selector: str, rounds: int) -> dict:
    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(rounds):
            t0 = time.perf_counter()
            async with session.get(
                f"{url}/api/v1/namespaces/{NAMESPACE}/pods", params={"labelSelector": selector}
            ) as resp:
                body = await resp.read()
            times.append((time.perf_counter() - t0) * 1000)
    items = len(json.loads(body)["items"])
    times.sort()
    return {
        "selector": selector,
        "items": items,
        "rounds": rounds,
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 1),
    }


async def main_async(args: argparse.Namespace) -> dict:
    proc, url = start_kubesim(args.cluster)
    try:
        async with aiohttp.ClientSession() as session:
            await session.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        results: dict = {"url": url, "cluster": args.cluster, "cpus": os.cpu_count()}
        results["rss_empty_mb"] = round(rss_mb(proc.pid), 1)
        results["watch"] = await bench_watch(url, args.watch_pods, 10, 50)
        results["fill_seconds"] = round(await fill(url, args.pods, args.watch_pods, 50), 1)
        results["list_one_group"] = await bench_list(url, "app=bench,group=g3", args.rounds)
        results["list_all"] = await bench_list(url, "app=bench", args.rounds)
        results["rss_mb"] = round(rss_mb(proc.pid), 1)
        results["pods"] = args.pods
        return results
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument(
        "--watch-pods", type=int, default=2000, help="pods created during the watch measurement"
    )
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument(
        "--cluster", action="store_true", help="run the simulated cluster too (demo inventory)"
    )
    results = asyncio.run(main_async(p.parse_args()))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
