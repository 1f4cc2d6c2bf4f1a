"""GPU usage benchmark (not part of the test suite).

Against a PostgreSQL server started here (stack.postgres.PostgresServer; fsync off like the
tests unless --durable) and, for the scrape loop, a kubesim subprocess over HTTP:

1. ingest: raw samples stored through `services.samples_insert` (COPY into a temporary table,
   then INSERT … SELECT … ON CONFLICT DO NOTHING), in batches of 1,000 and 10,000; for
   comparison the ORM's bulk_create(ignore_conflicts=True). Goal: ≥ 20,000 samples/s.
2. report: 10 million raw samples generated over 90 days (200 workloads × 2 GPUs, one sample
   per GPU every 15 s while they run, 20 tenants), rolled up by `services.usage_rollup`; then a
   tenant's 90-day report (`selectors.usage_report`, the code behind GET usage/) for every
   group_by, with whole-day and ragged (minute) ends, JSON and CSV. Goal: < 300 ms.
3. scrape memory: `services.usage_scrape` 1,000 times against kubesim's /metrics (the demo
   inventory, pods of portal workloads and one stray pod holding GPUs); RSS after each
   hundred cycles. Goal: flat.

Usage: .venv/bin/python bench/usage_bench.py [--samples 10000000] [--cycles 1000] [--durable]
       [--only ingest,report,scrape]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.portal_db import portal_django, start_postgres  # noqa: E402

T_END = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
DAYS = 90
STEP = dt.timedelta(seconds=15)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def catalogue(n_tenants: int = 20, n_users: int = 50):
    from django.contrib.auth import get_user_model

    from catalogue.models import GpuType
    from tenants.models import Tenant

    types = [GpuType.objects.get_or_create(slug=slug, defaults={
        "name": slug.upper(), "node_selector": {"gputype": slug}})[0]
        for slug in ("a100", "v100", "t4")]
    tenants = [Tenant.objects.get_or_create(keystone_project_id=f"bench-{i}", defaults={
        "name": f"tenant-{i:02d}", "namespace": f"gpu-bench-{i:02d}"})[0]
        for i in range(n_tenants)]
    users = [get_user_model().objects.get_or_create(username=f"user-{i:02d}")[0]
             for i in range(n_users)]
    return types, tenants, users


def make_workload(tenant, owner, gpu_type, gpu_count, started, finished, name="bench"):
    from catalogue.models import Template
    from workloads.models import Workload

    workload = Workload.objects.create(
        tenant=tenant, owner=owner, name=name, template=Template.objects.get(slug="jupyter"),
        kind="service", gpu_type=gpu_type, gpu_count=gpu_count, image="bench:1", port=8888,
        cpu=4, memory_gb=16, state="succeeded" if finished else "running", started_at=started,
        finished_at=finished)
    workload.object_name = f"wl-{workload.pk}-{name}"
    workload.save(update_fields=["object_name"])
    return workload


# --- 1. ingest -------------------------------------------------------------------------------

def rows_for(n: int, start: dt.datetime, *, gpus: int = 1000, workload=None):
    """n samples of `gpus` devices, one per device per 15 s from start."""
    rows, at, i = [], start, 0
    wid = workload.pk if workload else None
    tid = workload.tenant_id if workload else None
    while i < n:
        for g in range(gpus):
            if i == n:
                break
            rows.append((at, f"node-{g // 8}", g % 8, f"GPU-{g:08d}", "", wid, tid,
                         "ns" if wid else "", f"pod-{g}" if wid else "", 50.0 + g % 50, 12000,
                         81920, 45.0, 250.0, 0, 0))
            i += 1
        at += STEP
    return rows


def bench_ingest() -> dict:
    from usage.models import GpuSample
    from usage.services import samples_insert

    results = {}
    for batch in (1000, 10000):
        n = 200_000
        rows = rows_for(n, T_END - dt.timedelta(days=120 + batch // 1000))
        started = time.perf_counter()
        stored = sum(samples_insert(rows=rows[i:i + batch]) for i in range(0, n, batch))
        elapsed = time.perf_counter() - started
        assert stored == n, stored
        again = samples_insert(rows=rows[:batch])  # a re-sent batch: dropped
        assert again == 0
        results[f"copy, batches of {batch}"] = round(n / elapsed)
    n = 100_000
    rows = rows_for(n, T_END - dt.timedelta(days=200))
    fields = ("at", "node", "gpu_index", "uuid", "mig_instance", "workload_id", "tenant_id",
              "namespace", "pod", "util", "memory_used_mib", "memory_total_mib", "temperature",
              "power_w", "xid", "ecc_dbe")
    started = time.perf_counter()
    for i in range(0, n, 10000):
        GpuSample.objects.bulk_create([GpuSample(**dict(zip(fields, r, strict=True)))
                                       for r in rows[i:i + 10000]], ignore_conflicts=True)
    results["ORM bulk_create, batches of 10000"] = round(n / (time.perf_counter() - started))
    GpuSample.objects.all().delete()
    return results


# --- 2. report -------------------------------------------------------------------------------

def generate(n_samples: int, types, tenants, users) -> tuple[list, float, float]:
    """200 workloads × 2 GPUs over 90 days, n_samples in all; returns (workloads, seconds to
    generate and store, seconds to roll up)."""
    from usage.services import samples_insert, usage_rollup

    rng = random.Random(42)
    n_workloads, gpus = 200, 2
    per_gpu = n_samples // (n_workloads * gpus)
    run = per_gpu * STEP
    start_all = T_END - dt.timedelta(days=DAYS)
    span = (T_END - start_all) - run
    workloads = []
    for i in range(n_workloads):
        started = start_all + dt.timedelta(seconds=rng.uniform(0, span.total_seconds()))
        started = started.replace(microsecond=0)
        workloads.append(make_workload(tenants[i % len(tenants)], users[i % len(users)],
                                       types[i % 3], gpus, started, started + run,
                                       name=f"run-{i}"))
    t0 = time.perf_counter()
    stored = 0
    for w in workloads:
        batch = []
        for g in range(gpus):
            uuid = f"GPU-w{w.pk:05d}-{g}"
            at = w.started_at + STEP
            for k in range(per_gpu):
                util = 90.0 if (k // 240) % 3 else 5.0  # an hour idle in three
                batch.append((at, f"node-{w.pk % 40}", g, uuid, "", w.pk, w.tenant_id,
                              w.tenant.namespace, f"{w.object_name}-abc", util, 30000, 81920,
                              60.0, 300.0, 0, 0))
                at += STEP
        for i in range(0, len(batch), 50000):
            stored += samples_insert(rows=batch[i:i + 50000])
    generated = time.perf_counter() - t0
    print(f"  generated {stored:,} raw samples in {generated:.1f} s "
          f"({stored / generated:,.0f}/s)", flush=True)
    t0 = time.perf_counter()
    report = usage_rollup(since=start_all, until=T_END, now=T_END + dt.timedelta(hours=1))
    rolled = time.perf_counter() - t0
    print(f"  rolled up in {rolled:.1f} s ({stored / rolled:,.0f} samples/s): {report}",
          flush=True)
    return workloads, generated, rolled


def bench_report(n_samples: int) -> dict:
    from django.db import connection

    from usage.api.renderers import UsageCsvRenderer
    from usage.models import GpuSample, GpuUsageRollup
    from usage.selectors import (
        report_columns,
        usage_report,
        usage_rollups_for_query,
        usage_totals,
    )

    types, tenants, users = catalogue()
    _workloads, generated, rolled = generate(n_samples, types, tenants, users)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    tenant = tenants[3]
    identity = SimpleNamespace(is_admin=False, project=SimpleNamespace(id=tenant.keystone_project_id),
                               projects=[SimpleNamespace(id=tenant.keystone_project_id)])
    ranges = {
        "whole days": (T_END - dt.timedelta(days=DAYS), T_END),
        "ragged ends": (T_END - dt.timedelta(days=DAYS, minutes=-17), T_END -
                        dt.timedelta(minutes=43)),
    }
    timings: dict[str, float] = {}
    for label, (since, until) in ranges.items():
        for group_by in ("tenant", "user", "gpu_type", "workload", "day"):
            samples = []
            for _ in range(7):
                t0 = time.perf_counter()
                rows = usage_report(usage_rollups_for_query(identity), since=since, until=until,
                                    group_by=group_by)
                body = {"columns": report_columns(group_by), "totals": usage_totals(rows),
                        "results": rows}
                json.dumps(body, default=str)
                UsageCsvRenderer().render(body)
                samples.append(time.perf_counter() - t0)
            timings[f"{label}, group_by={group_by}"] = round(1000 * statistics.median(samples), 1)
    return {"raw samples": GpuSample.objects.count(),
            "minute rollups": GpuUsageRollup.objects.filter(granularity="minute").count(),
            "hour rollups": GpuUsageRollup.objects.filter(granularity="hour").count(),
            "generate s": round(generated, 1), "rollup s": round(rolled, 1),
            "report ms (median of 7)": timings}


# --- 3. scrape memory ------------------------------------------------------------------------

def start_kubesim(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    kubeconfig = workdir / "kubeconfig"
    cmd = [sys.executable, "-m", "kubesim", "--port", "0", "--log-level", "WARNING",
           "--inventory", str(REPO / "deploy" / "kubesim" / "demo-inventory.yaml"),
           "--kubeconfig", str(kubeconfig), "--metrics-interval", "0.5",
           "--container-create-delay", "0.1", "--ready-delay", "0.1"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("kubesim listening on "):
        proc.kill()
        raise SystemExit(f"kubesim did not start: {line!r}")
    return proc, str(kubeconfig)


def bench_scrape(cycles: int, workdir: Path) -> dict:
    from django.conf import settings

    from kube.client import Kube
    from usage.models import GpuSample
    from usage.services import usage_scrape

    proc, kubeconfig = start_kubesim(workdir)
    settings.KUBECONFIG = kubeconfig
    try:
        types, tenants, users = catalogue(2, 2)
        kube = Kube()
        pods = []
        for i, tenant in enumerate(tenants):
            kube.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": tenant.namespace}})
            for j in range(3):
                workload = make_workload(tenant, users[i], types[0], 2,
                                         dt.datetime.now(dt.UTC), None, name=f"nb{j}")
                pods.append((tenant.namespace, f"{workload.object_name}-7d9f8-x{j}x{i}"))
        pods.append((tenants[0].namespace, "stray-trainer"))
        for namespace, name in pods:
            kube.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": namespace,
                                      "annotations": {"kubesim.io/gpu-trace": "bursty"}},
                         "spec": {"nodeSelector": {"gputype": "a100"},
                                  "tolerations": [{"key": "nvidia.com/gpu",
                                                   "operator": "Exists"}],
                                  "containers": [{"name": "c", "image": "busybox:1.36",
                                                  "resources": {"limits": {
                                                      "nvidia.com/gpu": "2"}}}]}})
        time.sleep(2)
        rss, durations = {}, []
        start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
        report = None
        for i in range(1, cycles + 1):
            t0 = time.perf_counter()
            # a fresh second per cycle, as beat's 15 s ticks would give
            report = usage_scrape(kube=kube, now=start + i * STEP)
            durations.append(time.perf_counter() - t0)
            if i % 100 == 0 or i == 10:
                gc.collect()
                rss[i] = round(rss_mib(), 1)
                print(f"  cycle {i}: RSS {rss[i]} MiB, last {report}", flush=True)
        return {"cycles": cycles, "rss MiB by cycle": rss,
                "cycle ms p50": round(1000 * statistics.median(durations), 1),
                "cycle ms p95": round(1000 * sorted(durations)[int(0.95 * len(durations))], 1),
                "samples stored": GpuSample.objects.count(), "last cycle": str(report)}
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--durable", action="store_true", help="PostgreSQL with fsync on")
    parser.add_argument("--only", default="ingest,report,scrape")
    args = parser.parse_args()
    parts = set(args.only.split(","))

    workdir = Path(tempfile.mkdtemp(prefix="usage-bench-"))
    postgres = start_postgres(workdir, args.durable)
    try:
        portal_django(postgres.url)
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; PostgreSQL "
              f"{'durable' if args.durable else 'fsync off'} ({postgres.url})", flush=True)
        if "ingest" in parts:
            print("ingest (samples/s):", bench_ingest(), flush=True)
        if "report" in parts:
            print("report:", json.dumps(bench_report(args.samples), indent=1), flush=True)
        if "scrape" in parts:
            print("scrape:", json.dumps(bench_scrape(args.cycles, workdir), indent=1),
                  flush=True)
    finally:
        postgres.destroy()


if __name__ == "__main__":
    main()
