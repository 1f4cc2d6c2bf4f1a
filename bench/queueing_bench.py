#!/usr/bin/env python
"""Queueing on Kueue: many queued launches across many tenants, drained on the real control plane,
beside the same jobs submitted straight to Kueue in the same run.

    .venv/bin/python bench/queueing_bench.py [--launches 300] [--tenants 20] [--json out.json]

The real control plane (stack/k8s/cluster.py, the demo inventory: 16 A100s on two nodes) with
Kueue (stack/k8s/kueue.py), the portal on PostgreSQL. Sixteen tenants hold one A100 each as
nominal quota, the others none; every tenant may borrow without limit, with equal fair-sharing
weights. The benchmark launches `--launches` one-GPU batch jobs through the portal's own launch
(admission, the create task), spread over the tenants in a seeded random order, each running a
seeded 3-12 s, then runs the tracker until every one has finished.

Before that, on the same cluster, **Kueue alone**: the same jobs (tenants, seeded run times, order)
created back to back as batch/v1 Jobs (the portal's own Job manifest, without the portal's
labels) with the tenant's queue-name label, by the administrator's kubeconfig, with no portal in
the loop; drained when the last Job has finished. A watch on Jobs, pods and Kueue's Workloads
(the administrator's, in this process, the same for both sides) stamps each job's Job created,
quota reserved, pod running, Job finished and quota released; the portal side adds the launch
and the portal's seeing it finished. It reports, for both sides:

- **drain**: the time from the first submission to the last job finished (the portal: to the
  last workload the portal shows finished, from its row's last write; and to the last Job
  finished on the cluster, and to the end of the tracker cycle that brought the last), the
  ratio portal / Kueue alone, and the breakdown per job (medians): submitted → Job created →
  quota reserved → pod running → Job finished (less its run time) → quota released, and the
  portal's lag seeing it finished;

- **ideal**: total GPU-seconds / the GPUs the tenants' queues hold (16, or one per tenant where
  there are fewer tenants: the cohort holds only its members' nominal quotas);
- **order**: within each tenant, how many pairs of workloads started in the opposite order of
  their launch, and how many of those were launched a second or more apart (StrictFIFO
  queues order by their Workloads' creation time, which has whole seconds);
- **fairness**: per tenant, the GPUs it held on average while it had work waiting; their mean
  and Jain's index (1 = equal) among the tenants with a GPU of their own and among those with
  none;
- **portal overhead**: the benchmark process's CPU seconds (admission, the create tasks, the
  tracker, the estimates) per workload, and the lag from a pod's container start to the portal
  showing it running (median, p95);
- **estimate**: every 10 s, each queued workload's estimated start (tenants/kueue.py, workloads/queue.py) against
  when it really started: the median absolute error, and the share of workloads that had an
  estimate (none where the workloads ahead have no time limit and no history yet).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.portal_db import start_postgres  # noqa: E402


def start_cluster(workdir: Path):
    from stack.k8s.cluster import ControlPlane
    from stack.k8s.kueue import Kueue

    cp = ControlPlane(workdir / "kube", addons=[Kueue()], pod_start_seconds=0.5)
    began = time.perf_counter()
    cp.start()
    print(f"control plane with Kueue started in {time.perf_counter() - began:.1f} s", flush=True)
    return cp


JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


class WatcherProcess:
    """A watcher in a process of its own (`target(kubeconfig, path)`), writing one line per stamp
    to `path`: the benchmarks' clocks of the cluster (CLOCK_MONOTONIC, shared by the
    processes of the machine)."""

    target: Any = None  # the watcher function, set by each clock

    def __init__(self, kubeconfig: Path, path: Path) -> None:
        self.kubeconfig, self.path = kubeconfig, path
        self.proc: Any = None

    def start(self) -> Any:
        import multiprocessing

        self.path.write_text("")
        self.proc = multiprocessing.get_context("spawn").Process(
            target=type(self).target, args=(str(self.kubeconfig), str(self.path)), daemon=True)
        self.proc.start()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.join(timeout=10)


class ClusterClock(WatcherProcess):
    """Stamps, per Job (namespace, name), the monotonic time a watcher first saw each step:
    `created` (the Job), `reserved` (its Kueue Workload's QuotaReserved), `running` (its pod),
    `finished` (the Job Complete or Failed), `released` (its Workload Finished: the quota is
    free again). Three watches (Jobs, pods, Workloads) over every namespace through the
    administrator's client, the same for both sides of the benchmark, in a process of their
    own (in the benchmark's, they waited on the portal's work for the interpreter, and stamped
    Jobs finished after the portal had seen them finished). The clock is CLOCK_MONOTONIC,
    shared by the processes of the machine."""

    def __init__(self, kubeconfig: Path, path: Path) -> None:
        super().__init__(kubeconfig, path)
        self._stamps: dict[tuple[str, str], dict[str, float]] = {}
        self._read = 0

    @property
    def stamps(self) -> dict[tuple[str, str], dict[str, float]]:
        """What the watcher wrote so far (whole lines), first stamp of each step kept."""
        with open(self.path) as stream:
            stream.seek(self._read)
            text = stream.read()
        text = text[:text.rfind("\n") + 1]
        self._read += len(text.encode())
        for line in text.splitlines():
            namespace, name, step, at = line.split()
            stamps = self._stamps.setdefault((namespace, name), {})
            if step.startswith("evicted@"):  # Kueue took its quota back: it runs again later
                stamps["evictions"] = stamps.get("evictions", 0) + 1
            else:
                stamps.setdefault(step, float(at))
        return self._stamps


def watch_cluster(kubeconfig: str, path: str) -> None:
    """The watcher process of ClusterClock: one thread per kind, one line per step seen."""

    from kubernetes import client, config

    api = config.new_client_from_config(config_file=kubeconfig)
    stamp = stamp_writer(path)

    def see(kind: str, obj: dict, now: float) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        status = obj.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        if kind == "jobs":
            stamp(namespace, meta["name"], "created", now)
            if conditions.get("Complete") == "True" or conditions.get("Failed") == "True":
                stamp(namespace, meta["name"], "finished", now)
        elif kind == "pods":
            job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
            if job and status.get("phase") in ("Running", "Succeeded", "Failed"):
                stamp(namespace, job, "running", now)
        else:
            owners = [o["name"] for o in meta.get("ownerReferences") or () if o["kind"] == "Job"]
            if owners and conditions.get("QuotaReserved") == "True":
                stamp(namespace, owners[0], "reserved", now)
            if owners and conditions.get("Finished") == "True":
                stamp(namespace, owners[0], "released", now)
            evicted = [c for c in status.get("conditions") or ()
                       if c["type"] == "Evicted" and c["status"] == "True"]
            if owners and evicted:  # one line per eviction (its own transition time)
                stamp(namespace, owners[0], "evicted@" + evicted[0]["lastTransitionTime"], now)

    custom = client.CustomObjectsApi(api)
    listers = {
        "jobs": client.BatchV1Api(api).list_job_for_all_namespaces,
        "pods": client.CoreV1Api(api).list_pod_for_all_namespaces,
        "workloads": lambda **kw: custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "workloads", **kw)}

    follow_all(listers, lambda kind, obj, now, deleted: None if deleted else see(kind, obj, now))


def stamp_writer(path: str):
    """`stamp(namespace, name, step, at)`: one line per (namespace, name, step), the first time
    it is seen, appended to `path` (the watchers' file, read by their clocks); thread-safe."""
    import threading

    out = open(path, "a")  # noqa: SIM115 - open for the process's life
    lock = threading.Lock()
    seen: set[tuple[str, str, str]] = set()

    def stamp(namespace: str, name: str, step: str, at: float) -> None:
        with lock:
            if (namespace, name, step) not in seen:
                seen.add((namespace, name, step))
                out.write(f"{namespace} {name} {step} {at:.3f}\n")
                out.flush()

    return stamp


def follow_all(listers: dict, see) -> None:
    """List + watch every kind of `listers` (name → list function of the client), one thread
    each, for ever: `see(kind, obj, monotonic time, deleted)` for every object listed and every
    change; a 410 or a dropped connection lists again. The benchmarks' watcher processes."""
    import threading

    from kubernetes import watch

    def follow(kind: str) -> None:
        lister = listers[kind]
        while True:
            try:
                body = json.loads(lister(_preload_content=False).data)
                now = time.monotonic()
                for obj in body["items"]:
                    see(kind, obj, now, False)
                version = body["metadata"]["resourceVersion"]
                while True:
                    for event in watch.Watch().stream(
                            lister, resource_version=version, timeout_seconds=30,
                            allow_watch_bookmarks=True):
                        obj = event["raw_object"]
                        if event["type"] == "ERROR":
                            raise RuntimeError(obj)
                        version = obj["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            see(kind, obj, time.monotonic(), event["type"] == "DELETED")
            except Exception:  # a 410 or a dropped connection: list again
                time.sleep(0.2)

    threads = [threading.Thread(target=follow, args=(kind,), daemon=True) for kind in listers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


ClusterClock.target = staticmethod(watch_cluster)


def straight_job(*, name: str, namespace: str, seconds: int) -> dict:
    """A job of the plan as one submits it straight to Kueue: the portal's Job manifest (the
    same pod: one A100, 1 CPU, 1 GiB) in the tenant's queue, without the portal's labels."""
    from tenants.kueue import queue_labels
    from workloads.manifests import WorkloadSpec, make_job

    job = make_job(WorkloadSpec(
        workload_id=0, name=name, namespace=namespace, project_id="bench", owner="bench",
        owner_id="bench", template="custom", kind="batch", image="busybox:1.36",
        env=(("KUBESIM_RUN_SECONDS", str(seconds)),), node_selector=(("gputype", "a100"),),
        cpu="1", memory="1Gi", queue_labels=tuple(sorted(queue_labels("batch").items()))))
    job["metadata"]["labels"] = queue_labels("batch")
    job["spec"]["template"]["metadata"]["labels"] = {}
    return job


def kueue_alone(plan, clock: ClusterClock, kubeconfig: Path, timeout: float, *,
                prefix: str = "straight") -> dict:
    """Submit the plan's jobs straight to Kueue, back to back, and wait until the last one has
    finished. Returns the drain and the jobs' stamps."""
    from kubernetes import client, config

    batch = client.BatchV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    jobs = []
    began = time.monotonic()
    for n, (tenant, seconds) in enumerate(plan):
        job = straight_job(name=f"{prefix}-{n}", namespace=tenant.namespace, seconds=seconds)
        submitted = time.monotonic()
        batch.create_namespaced_job(tenant.namespace, job)
        jobs.append({"key": (tenant.namespace, job["metadata"]["name"]), "seconds": seconds,
                     "submitted": submitted})
    submitting = time.monotonic() - began
    print(f"{prefix}: {len(plan)} Jobs created in {submitting:.1f} s", flush=True)
    while not all("finished" in clock.stamps.get(j["key"], {}) for j in jobs):
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{prefix}: the queue did not drain in time")
        time.sleep(0.2)
    for j in jobs:
        j.update(clock.stamps[j["key"]])
    last = max(j["finished"] for j in jobs)
    print(f"{prefix}: drained in {last - began:.1f} s", flush=True)
    return {"submitting_seconds": round(submitting, 1), "drain_seconds": round(last - began, 1),
            "jobs": jobs, "began": began}


class LoadSampler:
    """The machine's 1-minute load average every 2 s, in a thread: what else was running on it
    while each side drained (other work on a small machine slows the cluster's controllers)."""

    def __init__(self) -> None:
        import threading

        self.samples: list[tuple[float, float]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stopping.wait(2.0):
            self.samples.append((time.monotonic(), os.getloadavg()[0]))

    def mean(self, start: float, end: float) -> float | None:
        inside = [load for at, load in self.samples if start <= at <= end]
        return round(statistics.mean(inside), 1) if inside else None


STEPS = (("submitted", "created"), ("created", "reserved"), ("reserved", "running"),
         ("running", "finished"), ("finished", "released"))


def breakdown(jobs: list[dict]) -> dict:
    """Per step, the median and p95 seconds over the jobs (running → finished less the job's
    own run time: what the pod's end and the Job's completion add)."""
    figures = {}
    for a, b in STEPS + (("finished", "seen"),):
        values = sorted(j[b] - j[a] - (j["seconds"] if (a, b) == ("running", "finished") else 0)
                        for j in jobs if a in j and b in j)
        if values:
            figures[f"{a}_to_{b}"] = {"median": round(statistics.median(values), 2),
                                      "p95": round(values[int(0.95 * (len(values) - 1))], 2)}
    # the quota each job held beyond its run time, summed, per GPU: what it adds to the drain
    held = [j["released"] - j["reserved"] - j["seconds"] for j in jobs
            if "released" in j and "reserved" in j]
    figures["quota_held_beyond_run_seconds_per_job"] = round(statistics.mean(held), 2) \
        if held else None
    # reclaimed by a lender (preempted): the run so far is lost, and it queues again
    figures["evictions"] = sum(j.get("evictions", 0) for j in jobs)
    return figures


def per_job_table(jobs: list[dict], began: float, path: Path) -> None:
    """Every job's stamps, in seconds from the side's first submission (a CSV)."""
    steps = ("submitted", "created", "reserved", "running", "finished", "released", "seen")
    lines = ["job,namespace,seconds," + ",".join(steps) + ",evictions"]
    for j in jobs:
        lines.append(",".join([j["key"][1], j["key"][0], str(j["seconds"])] + [
            f"{j[s] - began:.2f}" if s in j else "" for s in steps]
            + [str(j.get("evictions", 0))]))
    path.write_text("\n".join(lines) + "\n")


def jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if any(values) else 1.0


def run(args, admin_kubeconfig: Path) -> dict:
    from django.utils import timezone

    from catalogue.models import GpuType, Template
    from identity.models import User
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update, tenant_ensure
    from workloads.models import Workload
    from workloads.queue import estimates
    from workloads.services import workload_launch
    from workloads.tasks import workload_create_task
    from workloads.tracking.tracker import Tracker

    rng = random.Random(7)
    a100 = GpuType.objects.create(slug="a100", name="NVIDIA A100", node_selector={"gputype": "a100"})
    owner = User.objects.create(username="bench")
    tenants = []
    for i in range(args.tenants):
        tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"team-{i:02d}")
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": 16, "max_workloads": args.launches, "cpu": 64, "memory_gb": 256,
            "gpus_by_type": {"a100": 1 if i < 16 else 0}})
        tenant_reconcile(tenant_id=tenant.pk)
        tenants.append(tenant)
    template = Template.objects.get(slug="custom")
    plan = [(rng.choice(tenants), rng.randint(3, 12)) for _ in range(args.launches)]
    gpus = min(16, len(tenants))  # the cohort's nominal quotas: one A100 for each of 16 tenants
    clock = ClusterClock(admin_kubeconfig, args.workdir / "stamps.txt").start()
    load = LoadSampler()
    load.thread.start()
    # the cluster's first jobs pay its warming up (informers, caches): one short job per
    # tenant straight to Kueue, drained before either side, so that neither side pays it
    kueue_alone([(t, 1) for t in tenants], clock, admin_kubeconfig, args.timeout,
                prefix="warmup")
    alone = None
    if not args.portal_only and not args.portal_first:
        alone = kueue_alone(plan, clock, admin_kubeconfig, args.timeout)
    tracker = Tracker()
    tracker.run_for(0.5)
    cpu0, began = time.process_time(), time.monotonic()
    launched: dict[int, float] = {}
    jobs: dict[int, dict] = {}
    profile = None
    if args.profile_launches:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    for n, (tenant, seconds) in enumerate(plan):
        submitted = time.monotonic()
        workload, _ = workload_launch(tenant=tenant, user=owner, request={
            "template": template, "name": f"job-{n}", "kind": "batch", "gpu_type": a100,
            "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1,
            "env": {"KUBESIM_RUN_SECONDS": str(seconds)}})
        workload_create_task(workload.pk)
        launched[workload.pk] = time.monotonic()
        workload.refresh_from_db(fields=["object_name"])
        jobs[workload.pk] = {"key": (tenant.namespace, workload.object_name),
                             "seconds": seconds, "submitted": submitted}
    if profile is not None:
        profile.disable()
        profile.dump_stats(str(args.profile_launches))
    launches_done = timezone.now()
    launches_took = time.monotonic() - began
    print(f"portal: {len(plan)} launches in {launches_took:.1f} s", flush=True)
    predictions: list[tuple[int, dt.datetime]] = []
    estimated_ids: set[int] = set()
    held = {t.pk: 0.0 for t in tenants}    # GPU-seconds held while it had work waiting
    waited = {t.pk: 0.0 for t in tenants}  # seconds it had work waiting
    last_snapshot = 0.0
    while Workload.objects.exclude(state__in=Workload.FINAL_STATES).exists():
        step = time.monotonic()
        tracker.run_for(2.0)
        elapsed = time.monotonic() - step
        seen_at = time.monotonic()
        for pk in Workload.objects.filter(state__in=Workload.FINAL_STATES).values_list(
                "pk", flat=True):
            jobs[pk].setdefault("seen", seen_at)
        waiting_tenants = set(Workload.objects.filter(state=Workload.State.QUEUED)
                              .values_list("tenant_id", flat=True))
        for tenant_id in waiting_tenants:
            waited[tenant_id] += elapsed
        for tenant_id in Workload.objects.filter(state=Workload.State.RUNNING) \
                .values_list("tenant_id", flat=True):
            if tenant_id in waiting_tenants:
                held[tenant_id] += elapsed
        if time.monotonic() - last_snapshot >= 10:
            last_snapshot = time.monotonic()
            for pk, estimate in estimates(a100, capacity=gpus).items():
                if estimate.start is not None:
                    predictions.append((pk, estimate.start))
                    estimated_ids.add(pk)
        if time.monotonic() - began > args.timeout:
            raise SystemExit("the queue did not drain in time")
    loop_ended = time.monotonic() - began
    cpu = time.process_time() - cpu0
    if args.portal_first and not args.portal_only:
        alone = kueue_alone(plan, clock, admin_kubeconfig, args.timeout)
    clock.stop()
    for job in jobs.values():
        job.update({k: v for k, v in clock.stamps.get(job["key"], {}).items()})
    on_cluster = max((j["finished"] for j in jobs.values() if "finished" in j), default=began)
    rows = {w.pk: w for w in Workload.objects.all()}
    # when the portal wrote each final state (the row's last write), on the monotonic clock:
    # the loop above sees it only at the end of the tracker's cycle it came in
    offset = time.time() - time.monotonic()
    for pk, job in jobs.items():
        job["seen"] = min(job["seen"], rows[pk].updated_at.timestamp() - offset)
    drain = max(j["seen"] for j in jobs.values()) - began
    started = {pk: w.started_at for pk, w in rows.items()}
    inversions = apart = pairs = 0
    for tenant in tenants:
        mine = sorted((pk for pk, w in rows.items() if w.tenant_id == tenant.pk))
        for i, a in enumerate(mine):
            for b in mine[i + 1:]:
                pairs += 1
                if started[b] < started[a]:
                    inversions += 1
                    # Kueue orders a queue by its Workloads' creation time, in whole seconds
                    apart += launched[b] - launched[a] >= 1.0
    errors = [abs((started[pk] - predicted).total_seconds()) for pk, predicted in predictions]
    lags = []
    for workload in rows.values():
        running = workload.events.filter(reason="Running").order_by("at").first()
        # those that started while the benchmark was launching waited for its first cycle
        if running and workload.started_at and workload.started_at > launches_done:
            lags.append((running.at - workload.started_at).total_seconds())
    lags.sort()
    states = {s: sum(1 for w in rows.values() if w.state == s) for s in Workload.FINAL_STATES}
    busy = sum(seconds for _, seconds in plan)
    if args.per_job:
        per_job_table(list(jobs.values()), began, args.per_job.with_suffix(".portal.csv"))
        if alone:
            per_job_table(alone["jobs"], alone["began"], args.per_job.with_suffix(".kueue.csv"))
    figures = {
        "launches": len(plan), "tenants": len(tenants), "gpus": gpus, "states": states,
        "ideal_seconds": round(busy / gpus, 1),
        "kueue_alone": {"submitting_seconds": alone["submitting_seconds"],
                        "drain_seconds": alone["drain_seconds"],
                        "mean_load": load.mean(alone["began"],
                                               alone["began"] + alone["drain_seconds"]),
                        "breakdown": breakdown(alone["jobs"])} if alone else None,
        "portal": {"launching_seconds": round(launches_took, 1),
                   "drain_seconds": round(drain, 1),
                   "loop_ended_seconds": round(loop_ended, 1),
                   "mean_load": load.mean(began, began + loop_ended),
                   "drain_on_cluster_seconds": round(on_cluster - began, 1),
                   "breakdown": breakdown(list(jobs.values()))},
        "ratio_portal_to_kueue_alone": round(drain / alone["drain_seconds"], 2)
        if alone else None,
        "order": "portal first" if args.portal_first else "Kueue alone first",
        "order_inversions": {"pairs": pairs, "inverted": inversions,
                             "inverted_launched_1s_apart": apart},
        # average GPUs held while it had work waiting: the 16 tenants with one GPU of their own,
        # and those with none (borrowers only); Jain's index within each group
        "fairness": {
            group: {"mean_gpus": round(statistics.mean(shares), 2),
                    "jain": round(jain(shares), 3)}
            for group, shares in (
                ("one_gpu_own", [held[t.pk] / waited[t.pk] for t in tenants[:16]
                                 if waited[t.pk]]),
                ("none_own", [held[t.pk] / waited[t.pk] for t in tenants[16:]
                              if waited[t.pk]]))
            if shares},
        "portal_cpu_ms_per_workload": round(1000 * cpu / len(plan), 1),
        "running_lag_seconds": {"median": round(statistics.median(lags), 2),
                                "p95": round(lags[int(0.95 * (len(lags) - 1))], 2)}
        if lags else None,
        "eta_median_abs_error_seconds": round(statistics.median(errors), 1) if errors else None,
        "eta_coverage": round(len(estimated_ids) / len(plan), 2),
        "eta_predictions": len(errors),
        "finished_at": timezone.now().isoformat(),
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=300)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--per-job", type=Path, help="write every job's stamps to PATH.portal.csv "
                        "and PATH.kueue.csv")
    parser.add_argument("--portal-only", action="store_true", help="skip the Kueue-alone side")
    parser.add_argument("--profile-launches", type=Path,
                        help="write a cProfile of the portal's launch loop to PATH")
    parser.add_argument("--portal-first", action="store_true",
                        help="the portal's side first, then Kueue alone (to see the order's part)")
    args = parser.parse_args()
    with_portal_on_kueue(args, prefix="queueing-bench-", start_cluster=start_cluster, run=run)


def with_portal_on_kueue(args, *, prefix: str, start_cluster, run) -> None:
    """A benchmark's run against a real control plane with Kueue (`start_cluster(workdir)`)
    and the portal on PostgreSQL and Redis in this process (Django set up, migrated):
    `run(args, admin_kubeconfig)` gives the figures, printed and written to `--json`; then
    everything is stopped and removed."""
    from stack.procs import free_port, stop
    from stack.redis import start_redis

    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    postgres = start_postgres(workdir)
    redis_port = free_port()
    redis = start_redis(redis_port, workdir / "redis", workdir / "redis.log")
    cp = start_cluster(workdir)
    os.environ.update({
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": postgres.url,
        "PORTAL_SECRET_KEY": "bench-" + "k" * 60, "PORTAL_TLS": "0",
        "KUBECONFIG": str(cp.portal_kubeconfig), "PORTAL_QUEUEING": "kueue",
    })
    try:
        import logging

        import django

        django.setup()
        logging.getLogger("workloads.tracking").setLevel(logging.WARNING)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        args.workdir = workdir
        figures = run(args, cp.admin_kubeconfig)
        print(json.dumps(figures, indent=2), flush=True)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
    finally:
        cp.stop()
        stop(redis)
        postgres.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
