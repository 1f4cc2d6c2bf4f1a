#!/usr/bin/env python
"""A script's burst of one-GPU notebooks on `make demo CLUSTER=kube`, beside JupyterHub's
KubeSpawner starting the same notebooks on the same cluster, in one run.

    .venv/bin/python bench/notebook_burst_bench.py [--count 8] [--rounds 3] [--floor]
                                                   [--json out.json]

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
With --floor, two more sides each round show what the cluster takes with no portal in the path:
- deployments: `count` copies of the Deployment the portal makes for a notebook (one launched
  and read before the rounds; the portal's labels replaced, its Kueue queue name kept), made
  at once; timed to every copy's pod Ready;
- gated pods: the same pod as `count` bare pods in the tenant's Kueue queue, timed alike.
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
import functools
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
    WORKLOAD_LABEL,
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
        self.apps = client.AppsV1Api(api_client)
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

    def raw_pods(self, namespace: str, selector: str) -> list[dict]:
        answer = self.core.list_namespaced_pod(namespace, label_selector=selector,
                                               _preload_content=False)
        return json.loads(answer.data)["items"]

    def deployments(self, namespace: str) -> list[dict]:
        answer = self.apps.list_namespaced_deployment(namespace, _preload_content=False)
        return json.loads(answer.data)["items"]

    def create(self, obj: dict) -> None:
        namespace = obj["metadata"]["namespace"]
        if obj["kind"] == "Deployment":
            self.apps.create_namespaced_deployment(namespace, obj, _preload_content=False)
        else:
            self.core.create_namespaced_pod(namespace, obj, _preload_content=False)

    def delete(self, obj: dict) -> None:
        meta = obj["metadata"]
        if obj["kind"] == "Deployment":
            self.apps.delete_namespaced_deployment(meta["name"], meta["namespace"],
                                                   propagation_policy="Background")
        else:
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"],
                                            grace_period_seconds=0)

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


# The floor under the portal's side: the same notebooks' objects made straight on the cluster,
# no portal in the path (--floor). "deployments": the portal's own Deployment of a notebook, as
# many copies at once; "gated pods": its pod as bare pods, Kueue's gate and all; KubeSpawner's
# pods (neither Deployment nor Kueue) are the third step down, Ready at its "ready" hop.
FLOOR_SIDES = ("deployments", "gated pods")
FLOOR = "floor"  # the copies' workload label: a launch key for HopWatch, no portal workload


def model_deployment(stack: DemoStack, cluster: Cluster, namespace: str) -> dict:
    """A notebook's Deployment as the portal makes it: one launched, read and stopped."""
    portal = Portal(stack.url, keystone_token(stack.keystone.url, USER, PASSWORD, PROJECT))
    try:
        made = portal.timed("POST", "/workloads/", json={
            "template": "jupyter", "gpu_type": "a100", "gpu_count": 1, "name": "model"})
        model = wait("the model notebook's Deployment", lambda: cluster.deployments(namespace))[0]
        portal.timed("DELETE", f"/workloads/{made['body']['id']}/")
    finally:
        portal.close()
    wait("the model's pods gone", lambda: cluster.pods(namespace) == 0)
    return model


def floor_objects(model: dict, side: str, namespace: str, count: int, n: int) -> list[dict]:
    """`count` copies of the model for `side`, each with a label of its own in place of the
    portal's (so the portal's tracker never sees them) and the model's Kueue queue name."""
    objects = []
    queue = {k: v for k, v in (model["metadata"].get("labels") or {}).items()
             if k.startswith("kueue.x-k8s.io/")}
    template = model["spec"]["template"]
    for i in range(count):
        # a key of each side's own: the other side's objects of the round, still going when
        # this side's watch starts, must not count as this side's launches
        name = f"{FLOOR}-{n}-{side.split()[-1]}-{i}"
        labels = {**queue, WORKLOAD_LABEL: name, FLOOR: "yes"}
        if side == "deployments":
            spec = {**model["spec"], "selector": {"matchLabels": {WORKLOAD_LABEL: labels[
                WORKLOAD_LABEL]}}, "template": {"metadata": {"labels": labels},
                                                "spec": template["spec"]}}
            objects.append({"apiVersion": "apps/v1", "kind": "Deployment", "spec": spec,
                            "metadata": {"name": name, "namespace": namespace,
                                         "labels": labels}})
        else:
            objects.append({"apiVersion": "v1", "kind": "Pod", "spec": template["spec"],
                            "metadata": {"name": name, "namespace": namespace,
                                         "labels": labels}})
    return objects


def floor_side(stack: DemoStack, cluster: Cluster, objects: list[dict]) -> dict:
    """Make `objects` at once; timed to the last of their pods Ready, as the namespace's watch
    saw it (HopWatch: no list of the API server's in the loop while the cluster works)."""
    namespace = objects[0]["metadata"]["namespace"]
    keys = {obj["metadata"]["labels"][WORKLOAD_LABEL] for obj in objects}
    hops = HopWatch(stack.kubeconfig, namespace).start()

    def ours() -> dict[str, dict[str, float]]:
        return {k: v for k, v in hops.hops.by_launch().items() if k in keys}

    def create(obj: dict) -> dict:
        cluster.create(obj)
        return {}

    try:
        started_wall = time.time()
        all_at_once([functools.partial(create, obj) for obj in objects], len(objects))
        seen = wait("every copy's pod Ready", lambda: (
            found if len(found := ours()) == len(keys)
            and all("ready" in h for h in found.values()) else None), every=0.05)
        figures = {"count": len(objects),
                   "seconds_to_all_running": max(h["ready"] for h in seen.values()) - started_wall,
                   "hops": hop_spread(seen, started_wall)}
    finally:
        hops.stop()
        for obj in objects:
            cluster.delete(obj)
    wait("the copies' pods gone", lambda: not cluster.raw_pods(namespace, FLOOR))
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
        model = model_deployment(stack, cluster, namespace) if args.floor else None
        rounds = []
        for n in range(1, args.rounds + 1):
            sides = ("portal", "kubespawner") if n % 2 else ("kubespawner", "portal")
            result = {}
            for side in sides + (FLOOR_SIDES if model else ()):
                log(f"round {n}: {side}, {args.count} notebooks at once")
                if side == "portal":
                    result[side] = portal_side(stack, cluster, namespace, args.count)
                elif side == "kubespawner":
                    result[side] = spawner_side(stack, cluster, image, args.count, n)
                else:
                    result[side] = floor_side(stack, cluster, floor_objects(
                        model, side, namespace, args.count, n))
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
    parser.add_argument("--floor", action="store_true",
                        help="each round also times the portal's notebook objects made straight"
                             " on the cluster: its Deployments, and its pods as bare gated pods")
    args = parser.parse_args()
    figures = run(args)
    text = json.dumps(figures, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)
    for n, r in enumerate(figures["rounds"], 1):
        floor = "".join(f", {side} {r[side]['seconds_to_all_running']:.2f} s"
                        for side in FLOOR_SIDES if side in r)
        print(f"round {n} ({r['first']} first): portal {r['portal']['seconds_to_all_running']:.2f} s,"
              f" KubeSpawner {r['kubespawner']['seconds_to_all_running']:.2f} s,"
              f" ratio {r['ratio']:.2f}{floor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
