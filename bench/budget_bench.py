"""GPU-hour budget benchmark (not part of the test suite): what the budget check adds to a
launch.

Against a PostgreSQL server started here (stack.postgres.PostgresServer, fsync off like the
tests): a tenant with a hard budget and N finished workloads in the current period (default
5,000, of three GPU types, one and two nodes, from 50 users) plus a few running ones. Times,
each inside a transaction that locks the tenant row as a launch does:

- `budget_admission_check` (budgets/admission.py: the budget row, then one aggregate over the
  period's workloads), with and without a per-user cap (a second sum in the same query);
- the launch's quota check (`workloads.services._admission_check`) beside it, for scale;
- `launch_advice` (the launch page's live check and `POST workloads/check/`).

Goal: the budget check adds ≤ 5 ms p95 to a launch.

Usage: .venv/bin/python bench/budget_bench.py [--workloads 5000] [--calls 500] [--json out]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.portal_db import portal_django, start_postgres  # noqa: E402


def populate(n_workloads: int):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from budgets.models import Budget
    from budgets.periods import period_bounds
    from catalogue.models import GpuType, Template
    from tenants.models import Quota, Tenant
    from workloads.models import Workload

    types = [GpuType.objects.get_or_create(slug=slug, defaults={"name": slug.upper()})[0]
             for slug in ("a100", "v100", "t4")]
    template = Template.objects.get(slug="custom")
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"user{i}", keystone_user_id=f"id-{i}") for i in range(50))
    tenant = Tenant.objects.create(keystone_project_id="bench", name="bench-lab",
                                   namespace="gp-bench-lab", state="provisioned")
    other = Tenant.objects.create(keystone_project_id="other", name="other-lab",
                                  namespace="gp-other-lab", state="provisioned")
    from tenants.models import GpuQuota

    for t in (tenant, other):
        quota = Quota.objects.create(tenant=t, gpus_total=10_000, cpu=100_000,
                                     memory_gb=1_000_000, max_workloads=100_000)
        GpuQuota.objects.bulk_create(GpuQuota(quota=quota, gpu_type=g, gpus=1000) for g in types)
    now = timezone.now()
    start, _ = period_bounds("month", now)
    span = max((now - start).total_seconds(), 3600.0)

    def rows(owner_tenant, n, running=False):
        for i in range(n):
            begin = start + dt.timedelta(seconds=span * i / max(n, 1))
            end = None if running else min(begin + dt.timedelta(minutes=30 + i % 90), now)
            yield Workload(tenant=owner_tenant, owner=users[i % 50], name=f"w{i}",
                           template=template, kind="batch", gpu_type=types[i % 3],
                           gpu_count=1 + i % 4, nodes=1 + (i % 7 == 0), image="busybox",
                           cpu=1, memory_gb=1, started_at=begin, finished_at=end,
                           state="running" if running else "succeeded")

    Workload.objects.bulk_create(rows(tenant, n_workloads), batch_size=2000)
    Workload.objects.bulk_create(rows(tenant, 8, running=True))
    # another tenant's history in the same table
    Workload.objects.bulk_create(rows(other, n_workloads), batch_size=2000)
    budget = Budget.objects.create(tenant=tenant, gpu_hours=10_000_000, hard=True,
                                   weights={"a100": 1, "v100": 0.5, "t4": 0.25})
    return tenant, budget, users[0], types[0], template


def timed(fn, calls: int) -> dict:
    from django.db import transaction

    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        with transaction.atomic():
            fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 3),
            "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 3),
            "max_ms": round(samples[-1], 3), "n": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="budget-bench-"))
    postgres = start_postgres(workdir)
    try:
        portal_django(postgres.url)
        from django.db import connection

        from budgets.admission import budget_admission_check
        from budgets.selectors import budget_status, consumption
        from tenants.models import Quota, Tenant
        from workloads.selectors import launch_advice
        from workloads.services import _admission_check

        tenant, budget, user, gpu_type, template = populate(args.workloads)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        request = {"gpu_type": gpu_type, "gpu_count": 1, "nodes": 1, "cpu": 1, "memory": 1,
                   "kind": "batch", "template": template}
        quota = Quota.objects.get(tenant=tenant)

        def locked(check):
            def call():
                locked_tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
                check(locked_tenant)
            return call

        from django.utils import timezone

        from budgets.services import budget_settle

        status = budget_status(tenant, budget=budget)
        figures = {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                       f"{platform.python_version()}",
            "workloads_in_period": args.workloads, "used_gpu_hours": round(status.used, 1),
            "lock_only": timed(locked(lambda t: None), args.calls),
            "quota_check": timed(locked(lambda t: _admission_check(t, quota, request)),
                                 args.calls),
            # before the periodic check settled the period (the minute after a budget change)
            "budget_check_unsettled": timed(locked(lambda t: budget_admission_check(
                tenant=t, user=user, request=request)), args.calls),
        }
        # the periodic check (every minute) settles the period until 5 minutes ago
        budget_settle(budget=budget, now=timezone.now())
        settled = budget_status(tenant, budget=budget)
        whole = consumption(tenant, weights=budget.weights, start=settled.period_start,
                            now=settled.now)
        assert abs(settled.used - whole.used) < 1e-3 * whole.used, (settled.used, whole.used)
        figures["budget_check"] = timed(locked(lambda t: budget_admission_check(
            tenant=t, user=user, request=request)), args.calls)
        budget.user_caps = {user.username: 10_000_000}
        budget.save()
        budget_settle(budget=budget, now=timezone.now())
        figures["budget_check_with_user_cap"] = timed(locked(lambda t: budget_admission_check(
            tenant=t, user=user, request=request)), args.calls)
        figures["launch_advice"] = timed(lambda: launch_advice(
            tenant=tenant, user=user, gpu_type=gpu_type, gpus=2, max_runtime_minutes=600),
            args.calls)
        print(json.dumps(figures, indent=1), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        postgres.destroy()


if __name__ == "__main__":
    main()
