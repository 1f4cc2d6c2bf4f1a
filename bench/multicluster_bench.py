#!/usr/bin/env python
"""Batch work over two clusters through MultiKueue against the same work on one cluster.

    .venv/bin/python bench/multicluster_bench.py [--jobs 40] [--projects 5] [--json out.json]

Two real control planes (stack/k8s/multikueue.py): the portal's home cluster `main`, a
MultiKueue manager with nodes of its own (2 × 8 H100), and the worker `east` (2 × 8 H100),
registered with the manager (register_workers) and with the portal (a Cluster row). The portal
on PostgreSQL and Redis in this process; `--projects` tenants, each with 16 H100 of quota in
both clusters (the manager's queues dispatching to `east` included).

Two sides, each `--jobs` one-GPU batch jobs through the portal's own launch (admission, the
create task), spread over the projects in turn, one every `--every` seconds, each running
`--run-seconds` (so that no more run at once than either cluster has GPUs: what is measured is
the path to running, not a wait for room):

- **one cluster**: every job on `main` (its own Kueue, no MultiKueue);
- **two clusters**: every other job named `east` (queued on `main`, dispatched by MultiKueue,
  run on the worker), the others on `main`.

The tracker runs in a thread throughout (its reflectors on `main` and, for the pods and events of
what was dispatched, on `east`). Reported per side: launch → running (the launch call's start
to the workload's `started_at`, which the tracker writes when it sees it running), median and
p95, all jobs and per cluster; the ratio two clusters / one cluster (goal ≤ 1.2); and the
tracker's Kubernetes API requests per cluster, per tracker cycle (one watch period) and in all:
flat in the number of workloads (lists and watches per kind, never per object). And where the
seconds go (`Timeline`): per side and cluster the median seconds from the launch call to each
step of the clusters' objects (Job, Kueue Workload, quota, admission, unsuspended, pod,
scheduled, running), watched on both clusters, and for the dispatched jobs MultiKueue's
hand-over (the manager's quota → the worker's Workload copy) job by job in launch order.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.queueing_bench import LoadSampler, with_portal_on_kueue  # noqa: E402

WATCH_SECONDS = 30  # the tracker's watch period: one cycle


class Pair:
    """The manager and its worker, stopped together (with_portal_on_kueue stops `cp`)."""

    def __init__(self, manager: Any, east: Any) -> None:
        self.manager, self.east = manager, east
        self.portal_kubeconfig = manager.portal_kubeconfig
        self.admin_kubeconfig = manager.admin_kubeconfig

    def stop(self) -> None:
        self.east.stop()
        self.manager.stop()


def start_pair(workdir: Path) -> Pair:
    from stack.k8s import multikueue
    from stack.k8s.cluster import ControlPlane
    from stack.k8s.jobset import JobSet
    from stack.k8s.kueue import Kueue, MultiKueueSettings
    from stack.k8s.mpi_operator import MPIOperator

    inventory = workdir / "main-inventory.yaml"
    inventory.write_text(multikueue.EAST_INVENTORY.read_text().replace(
        "namePrefix: east-gpu-h100-", "namePrefix: main-gpu-h100-"))
    manager = ControlPlane(workdir / "main", inventory=inventory, pod_start_seconds=0.5,
                           addons=[JobSet(), MPIOperator(), Kueue(
                               multikueue=MultiKueueSettings(origin="gpu-portal-bench"))])
    east = multikueue.worker(workdir / "east")
    began = time.perf_counter()
    multikueue.start_together(manager, east)
    multikueue.register_workers(manager, {multikueue.EAST: east})
    print(f"main and east started and registered in {time.perf_counter() - began:.1f} s",
          flush=True)
    return Pair(manager, east)


class TrackerThread:
    """The portal's tracker, stepping in a thread of its own until stopped."""

    def __init__(self) -> None:
        from workloads.tracking.tracker import Tracker

        self.tracker = Tracker(watch_seconds=WATCH_SECONDS)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.steps = 0

    def _run(self) -> None:
        from django.db import connection

        self.tracker.start()
        try:
            while not self.stopping.is_set():
                self.tracker.step(0.2)
                self.steps += 1
        finally:
            self.tracker.stop()
            connection.close()

    def __enter__(self) -> TrackerThread:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=60)


WORKLOAD_ID = re.compile(r"wl-(\d+)-")  # in every object name of a workload (naming.py)
# the milestones of a job's way to running, in order, as the clusters' objects show them
# (watched: the time each was first seen, to the 0.1 s; conditions' own times have whole
# seconds only)
MILESTONES = ("job", "workload", "quota", "check", "unsuspended", "pod", "scheduled",
              "running")


class Timeline:
    """When each workload's objects reached each milestone, per cluster: watches on Jobs, Kueue
    Workloads and pods of every cluster of the pair, in threads, for the whole run."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.seen: dict[tuple[int, str, str], float] = {}  # (workload id, cluster, milestone)
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._watch, args=(cluster, kind), daemon=True)
                        for cluster in ("main", "east") for kind in ("Job", "Workload", "Pod")]

    def __enter__(self) -> Timeline:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=15)

    def _mark(self, workload_id: int, cluster: str, milestone: str, at: float) -> None:
        with self.lock:
            self.seen.setdefault((workload_id, cluster, milestone), at)

    def _watch(self, cluster: str, kind: str) -> None:
        from kube.client import Expired, Kube

        cp = self.pair.manager if cluster == "main" else self.pair.east
        version: str | None = None
        with cp.api_client() as api:
            kube = Kube(api)  # the portal's own watch: JSON as sent, no client models
            while not self.stopping.is_set():
                try:
                    for _, obj in kube.watch(kind, resource_version=version,
                                             timeout_seconds=5, bookmarks=False):
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        self._saw(cluster, kind, obj, time.time())
                except Expired:
                    version = None
                except Exception:  # noqa: BLE001 - a watch cut short: watch again
                    time.sleep(0.2)

    def _saw(self, cluster: str, kind: str, obj: dict[str, Any], at: float) -> None:
        meta = obj.get("metadata") or {}
        found = WORKLOAD_ID.search(meta.get("name") or "")
        if found is None:
            return
        pk = int(found.group(1))
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if kind == "Job":
            self._mark(pk, cluster, "job", at)
            if spec.get("suspend") is False:
                self._mark(pk, cluster, "unsuspended", at)
        elif kind == "Workload":
            self._mark(pk, cluster, "workload", at)
            if conditions.get("QuotaReserved") == "True":
                self._mark(pk, cluster, "quota", at)
            checks = status.get("admissionChecks") or []
            if conditions.get("Admitted") == "True" and all(
                    c.get("state") == "Ready" for c in checks):
                self._mark(pk, cluster, "check", at)
        else:
            self._mark(pk, cluster, "pod", at)
            if spec.get("nodeName"):
                self._mark(pk, cluster, "scheduled", at)
            if status.get("phase") == "Running":
                self._mark(pk, cluster, "running", at)

    def legs(self, launched: dict[int, tuple[float, str]]) -> dict[str, dict[str, Any]]:
        """Per cluster the jobs ran on: the median seconds from the launch call to each
        milestone on the home cluster (`main.…`) and, for those dispatched, on the worker."""
        found: dict[str, dict[str, list[float]]] = {}
        with self.lock:
            seen = dict(self.seen)
        for pk, (at, cluster) in launched.items():
            places = ("main", "east") if cluster == "east" else ("main",)
            for place in places:
                for milestone in MILESTONES:
                    when = seen.get((pk, place, milestone))
                    if when is not None:
                        found.setdefault(cluster, {}).setdefault(
                            f"{place}.{milestone}", []).append(when - at)
        def order(item: tuple[str, list[float]]) -> tuple[bool, int]:
            place, milestone = item[0].split(".")
            return place != "main", MILESTONES.index(milestone)

        medians: dict[str, dict[str, Any]] = {
            cluster: {name: round(statistics.median(values), 2)
                      for name, values in sorted(by.items(), key=order)}
            for cluster, by in found.items()}
        # MultiKueue's hand-over, job by job in launch order: from the manager's quota to the
        # worker's copy of the Workload (a growing wait is a queue in front of the worker)
        handover = [round(seen[(pk, "east", "workload")] - seen[(pk, "main", "quota")], 2)
                    for pk, (_, cluster) in sorted(launched.items(), key=lambda item: item[1][0])
                    if cluster == "east" and (pk, "east", "workload") in seen
                    and (pk, "main", "quota") in seen]
        if handover:
            medians["east"]["handover_in_launch_order"] = handover
        return medians


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 2)


def figures_of(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 2), "p95": percentile(values, 0.95),
            "max": round(max(values), 2), "n": len(values)}


def side(args, name: str, tenants: list, owner: Any, clusters: list[str],
         timeline: Timeline | None = None) -> dict:
    """Launch the side's jobs (job n on clusters[n % len(clusters)]) and wait until every one
    has finished; launch → running per job and cluster."""
    from catalogue.models import GpuType, Template
    from workloads.models import Workload
    from workloads.services import workload_launch
    from workloads.tasks import workload_create_task

    template, h100 = Template.objects.get(slug="custom"), GpuType.objects.get(slug="h100")
    launched: dict[int, tuple[float, str]] = {}
    began = time.time()
    for n in range(args.jobs):
        due = began + n * args.every
        if (wait := due - time.time()) > 0:
            time.sleep(wait)
        cluster = clusters[n % len(clusters)]
        at = time.time()
        workload, _ = workload_launch(tenant=tenants[n % len(tenants)], user=owner, request={
            "template": template, "name": f"{name}-{n}", "kind": "batch", "gpu_type": h100,
            "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1,
            "cluster": cluster, "env": {"KUBESIM_RUN_SECONDS": str(args.run_seconds)}})
        workload_create_task(workload.pk)
        launched[workload.pk] = (at, cluster)
    deadline = time.time() + args.timeout
    while Workload.objects.filter(pk__in=launched).exclude(
            state__in=Workload.FINAL_STATES).exists():
        if time.time() > deadline:
            raise SystemExit(f"{name}: the jobs did not finish in time")
        time.sleep(1.0)
    rows = Workload.objects.filter(pk__in=launched).values("pk", "state", "started_at")
    waits: dict[str, list[float]] = {}
    states: dict[str, int] = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
        at, cluster = launched[row["pk"]]
        if row["started_at"] is not None:
            waits.setdefault(cluster, []).append(row["started_at"].timestamp() - at)
    every = [w for values in waits.values() for w in values]
    result = {"states": states, "launch_to_running_seconds": figures_of(every),
              "per_cluster": {c: figures_of(v) for c, v in sorted(waits.items())},
              "seconds": round(time.time() - began, 1)}
    if timeline is not None:
        result["milestones_median_seconds"] = timeline.legs(launched)
    print(f"{name}: {result}", flush=True)
    return result


def run(args, admin_kubeconfig: Path) -> dict:
    from catalogue.models import GpuType
    from clusters.models import Cluster
    from clusters.services import cluster_probe_one
    from identity.models import User
    from kube.client import Kube
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update, tenant_ensure

    pair: Pair = args.pair
    east = Cluster.objects.create(name="east", kubeconfig_path=str(pair.east.portal_kubeconfig),
                                  gpu_types=["h100"])
    probed = cluster_probe_one(cluster_id=east.pk)
    if probed is None or probed.state != Cluster.State.READY:
        raise SystemExit(f"east does not answer: {probed and probed.reason}")
    GpuType.objects.create(slug="h100", name="NVIDIA H100 80GB", memory_gb=80,
                           node_selector={"gputype": "h100"})
    owner = User.objects.create(username="bench")
    tenants = []
    for i in range(args.projects):
        tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"project-{i}")
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": 16, "max_workloads": args.jobs, "cpu": 256, "memory_gb": 1024,
            "gpus_by_type": {"h100": 16}})
        tenant_reconcile(tenant_id=tenant.pk)
        tenant_reconcile(tenant_id=tenant.pk, kube=Kube(cluster="east"))
        tenants.append(tenant)
    load = LoadSampler()
    load.thread.start()
    with TrackerThread() as tracking, Timeline(pair) as timeline:
        # the clusters' first jobs pay their warming up (informers, caches): one per cluster
        side(argparse.Namespace(**{**vars(args), "jobs": 2, "every": 0.0}), "warmup", tenants,
             owner, ["main", "east"])
        before = tracking.tracker.stats_by_cluster()
        steps0, t0 = tracking.steps, time.time()
        results = {}
        order = [("two", ["main", "east"]), ("one", ["main"])]
        for name, clusters in order if args.two_first else reversed(order):
            began = time.monotonic()
            results[name] = side(args, name, tenants, owner, clusters, timeline)
            results[name]["mean_load"] = load.mean(began, time.monotonic())
        one, two = results["one"], results["two"]
        after = tracking.tracker.stats_by_cluster()
        elapsed = time.time() - t0
        steps = tracking.steps - steps0
    requests = {c: after.get(c, 0) - before.get(c, 0) for c in sorted(after)}
    cycles = elapsed / WATCH_SECONDS
    ratio = None
    if one["launch_to_running_seconds"] and two["launch_to_running_seconds"]:
        ratio = {k: round(two["launch_to_running_seconds"][k]
                          / one["launch_to_running_seconds"][k], 2) for k in ("median", "p95")}
    return {
        "jobs": args.jobs, "projects": args.projects, "every_seconds": args.every,
        "order": "two clusters first" if args.two_first else "one cluster first",
        "run_seconds": args.run_seconds,
        "one_cluster": one, "two_clusters": two, "ratio_two_to_one": ratio,
        "tracker": {"seconds": round(elapsed, 1), "watch_seconds": WATCH_SECONDS,
                    "drain_steps": steps, "requests": requests,
                    "requests_per_cycle": {c: round(n / cycles, 1) for c, n in requests.items()},
                    "reflectors": sorted(tracking.tracker.reflectors)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--projects", type=int, default=5)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between launches")
    parser.add_argument("--run-seconds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--two-first", action="store_true",
                        help="the two clusters' side first (to see the order's part)")
    args = parser.parse_args()

    def start(workdir: Path) -> Pair:
        args.pair = start_pair(workdir)
        return args.pair

    with_portal_on_kueue(args, prefix="multicluster-bench-", start_cluster=start, run=run)


if __name__ == "__main__":
    main()
