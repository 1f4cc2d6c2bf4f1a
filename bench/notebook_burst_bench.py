#!/usr/bin/env python
"""A script's burst of one-GPU notebooks on `make demo CLUSTER=kube`, beside JupyterHub's
KubeSpawner starting the same notebooks on the same cluster, in one run.

    .venv/bin/python bench/notebook_burst_bench.py [--count 8] [--rounds 3] [--json out.json]

The demo's own configuration on the real control plane (stack/demo_stack.py with cluster
"kube": etcd, kube-apiserver, controller-manager, scheduler, KWOK GPU nodes, MetalLB, Kueue;
SQLite, gunicorn, one Celery worker, the tracker, beat) on a temporary folder and free ports.
Each round, alternating which side goes first:
- portal: the researcher's script POSTs `count` one-GPU Jupyter launches at once with a fresh
  Keystone token; timed from the first POST to the last notebook `running` with its address
  (the tracker's "running" event, as the portal records it; every workload's `url` checked);
- KubeSpawner: `count` KubeSpawner.start() at once (bench/kubespawner_side.py, in a virtualenv
  of its own under ~/.cache/gpu-portal/bench/), same image, GPU type, GPU count, CPU and
  memory, in a namespace made and given its ServiceAccount before the clock starts; timed
  from the starts to the last start() returned (its pod running, its address known).
Between sides every notebook is stopped and its pods gone, so each side finds the GPUs free.
Each side also prints where its launches were on the cluster, hop by hop (Deployment,
ReplicaSet, pod, Kueue's Workload, quota reserved, admitted, ungated, scheduled, address, Ready:
first / median / last, seconds after its first request), from watches of its namespace
(stack/burst.py HopWatch), and the load average with each round.
Results: bench/results/notebook_burst.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from stack.burst import (  # noqa: E402
    HOPS,
    PASSWORD,
    PROJECT,
    USER,
    ClusterWatch,
    HopWatch,
    Portal,
    _running_events,
    _states,
    all_at_once,
    hop_spread,
    keystone_token,
    prepare_quota,
)
from stack.demo_stack import DemoStack  # noqa: E402

KUBESPAWNER = "jupyterhub-kubespawner==7.1.0"  # the newest on PyPI when this was written
VENV = Path.home() / ".cache" / "gpu-portal" / "bench" / "kubespawner-venv"
SPAWNER_NAMESPACE = "kubespawner-bench"
TIMEOUT = 180.0


def log(message: str, _started=time.monotonic()) -> None:  # noqa: B008 - the run's clock
    print(f"[{time.monotonic() - _started:7.1f} s] {message}", flush=True)


def kubespawner_python() -> Path:
    """KubeSpawner's own virtualenv, made once (outside the clone)."""
    python = VENV / "bin" / "python"
    stamp = VENV / f".{KUBESPAWNER}"
    if not stamp.exists():
        log(f"installing {KUBESPAWNER} into {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", KUBESPAWNER], check=True)
        stamp.touch()
    return python


def wait(what: str, check, timeout: float = TIMEOUT, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


class Cluster:
    """The admin's view of the cluster, for setting up and tearing down between sides."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def spawner_namespace(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_namespace({"metadata": {"name": SPAWNER_NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        # the controller-manager gives a new namespace its ServiceAccount seconds later; a
        # hub's namespace has had it long since, so the clock starts after it
        wait("the namespace's default ServiceAccount", lambda: any(
            sa.metadata.name == "default"
            for sa in self.core.list_namespaced_service_account(SPAWNER_NAMESPACE).items))

    def pods(self, namespace: str) -> int:
        return len(self.core.list_namespaced_pod(namespace).items)

    def cluster_queue_a100(self, name: str) -> str | None:
        from kubernetes.client.exceptions import ApiException

        try:
            queue = self.custom.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
        except ApiException:
            return None
        for group in queue["spec"].get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                if flavor["name"] == "gpu-a100":  # tenants.kueue.flavor_name
                    for resource in flavor["resources"]:
                        if resource["name"] == "nvidia.com/gpu":
                            return resource["nominalQuota"]
        return None


# the Celery workers that may run the create task (before the launch worker existed, `worker`)
CREATE_WORKERS = ("launch-worker", "worker")
CREATE_DONE = re.compile(r"workload_create_task\[[^]]+\] succeeded in ([0-9.]+)s")


def _log_sizes(stack: DemoStack) -> dict[str, int]:
    return {name: len(stack.log(name)) for name in CREATE_WORKERS}


def _create_task_seconds(stack: DemoStack, since: dict[str, int]) -> list[float]:
    """How long each create task of the round ran, as its worker logged it."""
    return sorted(float(seconds) for name in CREATE_WORKERS
                  for seconds in CREATE_DONE.findall(stack.log(name)[since[name]:]))


def _created_at(portal: Portal, ids: list[int]) -> dict[int, float]:
    """Per workload, the wall time of its "Created" event: its create task's end."""
    found: dict[int, float] = {}
    for wid in ids:
        body = portal.timed("GET", f"/workloads/{wid}/events/")["body"] or {}
        events = body.get("results", body) if isinstance(body, dict) else body
        for event in events or []:
            if event["reason"] == "Created":
                found[wid] = dt.datetime.fromisoformat(event["at"]).timestamp()
                break
    return found


def all_running(portal: Portal, ids: list[int]) -> bool:
    states = _states(portal, ids)
    return len(states) == len(ids) and all(s == "running" for s in states.values())


def portal_side(stack: DemoStack, cluster: Cluster, namespace: str, count: int) -> dict:
    token = keystone_token(stack.keystone.url, USER, PASSWORD, PROJECT)
    portal = Portal(stack.url, token)
    watch = ClusterWatch(stack.kubeconfig, namespace).start()  # each pod's Ready, our clock
    hops = HopWatch(stack.kubeconfig, namespace).start()  # each launch's hops, our clock
    launch = {"template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
    try:
        logs = _log_sizes(stack)
        started_wall, started = time.time(), time.monotonic()
        answers = all_at_once([lambda i=i: portal.timed("POST", "/workloads/", json={
            **launch, "name": f"burst {i}"}) for i in range(count)], count)
        answered = time.monotonic() - started
        ids = [a["body"]["id"] for a in answers if a["status"] == 201]
        if len(ids) != count:
            raise RuntimeError(f"launches answered {[a['status'] for a in answers]}")
        # the times come from the portal's own "running" events, not from this poll: it only
        # says when to read them, and at 2 lists a second it stays light beside the launches
        wait("every notebook running", lambda: all_running(portal, ids), every=0.5)
        workloads = [portal.timed("GET", f"/workloads/{w}/")["body"] for w in ids]
        running_at = _running_events(portal, ids, ("running",))
        created_at = _created_at(portal, ids)
        seconds = max(running_at.values()) - started_wall
        # from the pod Ready (as a watch on this machine saw it) to the portal's "running"
        lags = sorted(running_at[w] - watch.ready[w] for w in ids if w in watch.ready)
        figures = {"count": count, "answered_seconds": answered,
                   "seconds_to_all_running": seconds,
                   "each_seconds": sorted(t - started_wall for t in running_at.values()),
                   # where the seconds go: each launch's objects created (its create task
                   # ended: queued behind the others, then its requests), and each create
                   # task's own run as its worker logged it
                   "created_seconds": sorted(t - started_wall for t in created_at.values()),
                   "create_task_seconds": _create_task_seconds(stack, logs),
                   "all_have_address": all(w["url"] for w in workloads),
                   "ready_to_running_seconds": lags,
                   # each hop's first / median / last launch, seconds after the first POST
                   "hops": hop_spread(hops.hops.by_launch(), started_wall)}
        for wid in ids:
            portal.timed("DELETE", f"/workloads/{wid}/")
        wait("the portal's pods gone", lambda: cluster.pods(namespace) == 0)
        return figures
    finally:
        watch.stop()
        hops.stop()
        portal.close()


def spawner_side(stack: DemoStack, cluster: Cluster, image: str, count: int, n: int) -> dict:
    cluster.spawner_namespace()
    hops = HopWatch(stack.kubeconfig, SPAWNER_NAMESPACE).start()
    try:
        answer = subprocess.run(
            [str(kubespawner_python()), str(REPO / "bench" / "kubespawner_side.py"),
             "--namespace", SPAWNER_NAMESPACE, "--count", str(count), "--image", image,
             "--gpu-type", "a100", "--round", str(n)],
            env={**os.environ, "KUBECONFIG": str(stack.kubeconfig)}, capture_output=True,
            text=True, timeout=TIMEOUT)
        if answer.returncode:
            raise RuntimeError(f"kubespawner_side failed:\n{answer.stderr[-3000:]}")
        figures = json.loads(answer.stdout.strip().splitlines()[-1])
        figures["hops"] = hop_spread(hops.hops.by_launch(), figures["started_at"])
    finally:
        hops.stop()
    wait("KubeSpawner's pods gone", lambda: cluster.pods(SPAWNER_NAMESPACE) == 0)
    return figures


def run(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="notebook-burst-"))
    stack = DemoStack(root, web="gunicorn", cluster="kube")
    kubespawner_python()
    try:
        log(f"starting the demo on the real control plane under {root}")
        stack.start()
        cluster = Cluster(stack.kubeconfig)
        tenant = prepare_quota(stack.url, stack.keystone.url, stack.kubeconfig,
                               a100=args.count, v100=0)
        namespace = tenant["namespace"]
        wait("the tenant's ClusterQueue quota",
             lambda: cluster.cluster_queue_a100(namespace) == str(args.count))
        researcher = Portal(stack.url, keystone_token(stack.keystone.url, USER, PASSWORD,
                                                      PROJECT))
        templates = researcher.timed("GET", "/templates/")["body"]
        researcher.close()
        image = next(t["image"] for t in templates if t["slug"] == "jupyter")
        rounds = []
        for n in range(1, args.rounds + 1):
            sides = ("portal", "kubespawner") if n % 2 else ("kubespawner", "portal")
            result = {}
            for side in sides:
                log(f"round {n}: {side}, {args.count} notebooks at once")
                result[side] = (portal_side(stack, cluster, namespace, args.count)
                                if side == "portal"
                                else spawner_side(stack, cluster, image, args.count, n))
                log(f"  all running in {result[side]['seconds_to_all_running']:.2f} s")
                log("  hops (first / median / last, s): " + ", ".join(
                    f"{hop} {' / '.join(f'{t:.2f}' for t in result[side]['hops'][hop])}"
                    for hop in HOPS if hop in result[side]["hops"]))
                if side == "portal":
                    created, tasks = (result[side]["created_seconds"],
                                      result[side]["create_task_seconds"])
                    log(f"  created {created[0]:.2f}–{created[-1]:.2f} s after the first POST;"
                        f" create tasks ran {tasks[0]:.2f}–{tasks[-1]:.2f} s"
                        if created and tasks else "  (no create timings)")
            result["ratio"] = (result["portal"]["seconds_to_all_running"]
                               / result["kubespawner"]["seconds_to_all_running"])
            result["first"] = sides[0]
            # the machine's other work (two cores shared) weighs on both sides alike
            result["load_average"] = [round(v, 2) for v in os.getloadavg()]
            log(f"round {n}: ratio portal / KubeSpawner = {result['ratio']:.2f} (load average"
                f" {' '.join(map(str, result['load_average']))})")
            rounds.append(result)
        ratios = [r["ratio"] for r in rounds]
        return {"count": args.count, "rounds": rounds, "ratio_median": statistics.median(ratios),
                "ratio_max": max(ratios), "image": image, "kubespawner": KUBESPAWNER}
    finally:
        stack.close()
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    figures = run(args)
    text = json.dumps(figures, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)
    for n, r in enumerate(figures["rounds"], 1):
        print(f"round {n} ({r['first']} first): portal {r['portal']['seconds_to_all_running']:.2f} s,"
              f" KubeSpawner {r['kubespawner']['seconds_to_all_running']:.2f} s,"
              f" ratio {r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
