#!/usr/bin/env python
"""Queueing on Kueue: many queued launches across many tenants, drained on the real control plane.

    .venv/bin/python bench/queueing_bench.py [--launches 300] [--tenants 20] [--json out.json]

The real control plane (stack/k8s/cluster.py, the demo inventory: 16 A100s on two nodes) with
Kueue (stack/k8s/kueue.py), the portal on PostgreSQL. Sixteen tenants hold one A100 each as
nominal quota, the others none; every tenant may borrow without limit, with equal fair-sharing
weights. The benchmark launches `--launches` one-GPU batch jobs through the portal's own launch
(admission, the create task), spread over the tenants in a seeded random order, each running a
seeded 3-12 s, then runs the tracker until every one has finished. It reports:

- **drain**: the time from the first launch to the last workload finished, and the ideal time
  (total GPU-seconds / 16 GPUs);
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

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.tracking_bench import start_postgres  # noqa: E402


def start_cluster(workdir: Path):
    from stack.k8s.cluster import ControlPlane
    from stack.k8s.kueue import Kueue

    cp = ControlPlane(workdir / "kube", addons=[Kueue()], pod_start_seconds=0.5)
    began = time.perf_counter()
    cp.start()
    print(f"control plane with Kueue started in {time.perf_counter() - began:.1f} s", flush=True)
    return cp


def jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if any(values) else 1.0


def run(args) -> dict:
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
    tracker = Tracker()
    tracker.run_for(0.5)
    cpu0, began = time.process_time(), time.monotonic()
    launched: dict[int, float] = {}
    for n, (tenant, seconds) in enumerate(plan):
        workload, _ = workload_launch(tenant=tenant, user=owner, request={
            "template": template, "name": f"job-{n}", "kind": "batch", "gpu_type": a100,
            "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1,
            "env": {"KUBESIM_RUN_SECONDS": str(seconds)}})
        workload_create_task(workload.pk)
        launched[workload.pk] = time.monotonic()
    launches_done = timezone.now()
    print(f"{len(plan)} launches in {time.monotonic() - began:.1f} s", flush=True)
    predictions: list[tuple[int, dt.datetime]] = []
    estimated_ids: set[int] = set()
    held = {t.pk: 0.0 for t in tenants}    # GPU-seconds held while it had work waiting
    waited = {t.pk: 0.0 for t in tenants}  # seconds it had work waiting
    last_snapshot = 0.0
    while Workload.objects.exclude(state__in=Workload.FINAL_STATES).exists():
        step = time.monotonic()
        tracker.run_for(2.0)
        elapsed = time.monotonic() - step
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
            for pk, estimate in estimates(a100, capacity=16).items():
                if estimate.start is not None:
                    predictions.append((pk, estimate.start))
                    estimated_ids.add(pk)
        if time.monotonic() - began > args.timeout:
            raise SystemExit("the queue did not drain in time")
    drain = time.monotonic() - began
    cpu = time.process_time() - cpu0
    rows = {w.pk: w for w in Workload.objects.all()}
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
    figures = {
        "launches": len(plan), "tenants": len(tenants), "states": states,
        "drain_seconds": round(drain, 1), "ideal_seconds": round(busy / 16, 1),
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
    args = parser.parse_args()
    from stack.procs import free_port, stop
    from stack.redis import start_redis

    workdir = Path(tempfile.mkdtemp(prefix="queueing-bench-"))
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
        figures = run(args)
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
