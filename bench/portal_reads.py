"""What the read benchmarks share (bench/capacity_bench.py, bench/shared_gpu_bench.py): a
signed-in browser client of the demo's portal, the cluster calls its requests make, and timing
a call many times."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any


def namespace_entry(name: str, now: str) -> dict[str, Any]:
    """A namespace as kubesim's state file holds it (the benchmarks write their pods beside it)."""
    return {"resource": ["", "v1", "namespaces"], "object": {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                     "creationTimestamp": now, "labels": {}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(call: Callable[[], object], n: int, *, warm_up: int = 5,
          calls: list[str] | None = None) -> dict[str, float]:
    """Wall time, and this thread's CPU time: on two shared cores the stack's own processes
    (kubesim, the scraper, the tracker) take the CPU from the request as the inventory grows,
    which the wall time shows and the CPU time does not. `calls` (signed_in_portal's) is
    emptied after the warm-up, so that it holds the timed requests' cluster calls only."""
    for _ in range(warm_up):
        call()
    if calls is not None:
        calls.clear()
    times, cpu = [], []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.thread_time()
        call()
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    return {"p50_ms": round(statistics.median(times), 3),
            "p95_ms": round(percentile(times, 0.95), 3),
            "cpu_p50_ms": round(statistics.median(cpu), 3), "n": n}


def signed_in_portal(user: str = "researcher") -> tuple[Any, list[str]]:
    """A Django test client signed in as a demo user (the demo stack's environment set and
    Django set up by the caller), and the list every request to the cluster from this process
    is appended to ("GET api/v1/pods?…"), through the portal's own API client."""
    from django.conf import settings
    from django.test import Client

    from kube.client import api_client

    client = Client(HTTP_HOST="127.0.0.1")
    response = client.post("/login/", {"username": user, "password": f"{user}-demo-pass",
                                       "domain": "Default"})
    assert response.status_code == 302, response.status_code
    calls: list[str] = []
    rest = api_client(settings.KUBECONFIG).rest_client
    original = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(f"{method} {url.split('//', 1)[-1].split('/', 1)[-1]}")
        return original(method, url, *args, **kwargs)

    rest.request = request
    return client, calls


def get_ok(client: Any, path: str, headers: dict[str, str]) -> Callable[[], None]:
    """A call that GETs `path` and insists on a 200."""
    def call() -> None:
        answer = client.get(path, **headers)
        assert answer.status_code == 200, (path, answer.status_code)
    return call
