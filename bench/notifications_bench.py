"""Notifications benchmark (not part of the test suite): 10,000 finishing workloads produce
their notifications at ≥ 500/s.

Against a PostgreSQL server (fsync off like the tests unless --durable) and a Redis broker
started here: `--owners` users (every 10th with an e-mail address, every 10th a webhook of
their own, each 25th tenant a project webhook), then `--events` distinct events, each
`notify()` to its workload's owner in its own transaction, as the tracker's finish does: the
row written, the dispatch task handed to the broker at the commit where the owner has an
outside channel. Then the worker's share, run here as a worker would
(`notifications_dispatch_task` per event handed to the broker): the claim, the Delivery
rows (e-mail, webhooks), the e-mail and webhook tasks handed to Redis (nothing is sent: no
worker consumes them). Reported: notify() alone, the dispatch alone and both end to end, in
notifications per second, with the p50/p95 of one notify().

Usage: .venv/bin/python bench/notifications_bench.py [--events 10000] [--owners 1000]
       [--durable] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.portal_db import portal_django, start_postgres  # noqa: E402


def start_services(workdir: Path, durable: bool) -> tuple[object, subprocess.Popen, str]:
    from stack.procs import free_port
    from stack.redis import start_redis

    postgres = start_postgres(workdir, durable)
    port = free_port()
    redis = start_redis(port, workdir / "redis", workdir / "redis.log")
    return postgres, redis, f"redis://127.0.0.1:{port}/0"


def make_world(owners: int) -> tuple[list, list]:
    from django.contrib.auth import get_user_model

    from notifications.models import Webhook
    from tenants.models import Tenant

    tenants = Tenant.objects.bulk_create([
        Tenant(keystone_project_id=f"p{i}", name=f"lab-{i}", namespace=f"gpu-lab-{i}")
        for i in range(max(1, owners // 50))])
    users = get_user_model().objects.bulk_create([
        get_user_model()(username=f"user{i}", keystone_user_id=f"ks{i}",
                         email=f"user{i}@example.org" if i % 10 == 0 else "")
        for i in range(owners)])
    hooks = [Webhook(user=user, url=f"https://hooks.example.org/u/{user.pk}", secret="s" * 64)
             for user in users[::10]]
    hooks += [Webhook(tenant=tenant, url=f"https://hooks.example.org/p/{tenant.pk}",
                      secret="s" * 64) for tenant in tenants[::25]]
    Webhook.objects.bulk_create(hooks)
    return users, tenants


def run(events: int, owners: int) -> dict:
    from django.db import connection
    from django.db.models import Count

    from notifications.models import Delivery, Kind, Notification
    from notifications.services import notify
    from notifications.tasks import notifications_dispatch_task

    users, tenants = make_world(owners)
    latencies = []
    started = time.perf_counter()
    for i in range(events):
        user = users[i % len(users)]
        tenant = tenants[i % len(tenants)]
        key = f"finished:{i}:1"
        t0 = time.perf_counter()
        notify(kind=Kind.FINISHED, users=[user], tenant=tenant, title=f"job-{i} finished",
               text=f"Your workload job-{i} finished (exit code 0).", key=key,
               workload_id=i, link=f"/workloads/{i}/")
        latencies.append((time.perf_counter() - t0) * 1000)
    notify_seconds = time.perf_counter() - started
    # the worker's share: a dispatch task for each event notify() handed to the broker (those
    # whose owner has an outside channel; the others' rows were written handed out)
    handed = list(Notification.objects.filter(dispatched_at__isnull=True)
                  .values_list("key", flat=True).distinct())
    started = time.perf_counter()
    for key in handed:
        notifications_dispatch_task(key)
    dispatch_seconds = time.perf_counter() - started
    latencies.sort()
    made = Notification.objects.count()
    deliveries = {row["channel"]: row["n"] for row in Delivery.objects.values("channel")
                  .order_by().annotate(n=Count("id"))}
    connection.close()
    return {
        "events": events, "owners": owners, "notifications": made,
        "dispatch_tasks": len(handed),
        "deliveries": deliveries,
        "notify_per_second": round(events / notify_seconds),
        "dispatch_per_second": round(events / dispatch_seconds),
        "end_to_end_per_second": round(events / (notify_seconds + dispatch_seconds)),
        "notify_ms": {"p50": round(statistics.median(latencies), 2),
                      "p95": round(latencies[int(len(latencies) * 0.95) - 1], 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--owners", type=int, default=1_000)
    parser.add_argument("--durable", action="store_true", help="PostgreSQL with fsync on")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="notifications-bench-"))
    postgres, redis, redis_url = start_services(workdir, args.durable)
    try:
        portal_django(postgres.url, REDIS_URL=redis_url, PORTAL_EMAIL_HOST="mail.example.org")
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; PostgreSQL "
              f"{'durable' if args.durable else 'fsync off'}, Redis broker", flush=True)
        if os.environ.get("BENCH_PROFILE"):
            import cProfile
            import pstats

            profile = cProfile.Profile()
            figures = profile.runcall(run, args.events, args.owners)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
        else:
            figures = run(args.events, args.owners)
        print("notifications:", json.dumps(figures, indent=1), flush=True)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        goal = figures["end_to_end_per_second"] >= 500
        print(f"goal ≥ 500/s end to end: {'met' if goal else 'NOT met'}", flush=True)
    finally:
        redis.terminate()
        redis.wait(10)
        postgres.destroy()


if __name__ == "__main__":
    main()
