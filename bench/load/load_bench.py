#!/usr/bin/env python
"""Load test: the portal run the production way under simulated users, then a launch burst.

    .venv/bin/python bench/load/load_bench.py [--users 200] [--duration 300] [--burst 300]
                                              [--think 2,10] [--json out.json] [--keep]

1. Starts the stack the production way on loopback under a temporary folder (production.py):
   PostgreSQL (fsync on), Redis, Keystone, kubesim (inventory.yaml), gunicorn with 4 workers
   (the image's gunicorn.conf.py: gthread, 4 threads), two Celery workers (concurrency 4), the
   tracker and beat. Seeds one Keystone user per simulated user
   (ten per project, member role), gives every project the load quota (users.PROJECT_QUOTA)
   and provisions its namespace.
2. Steady load: every user signs in (the login form and a Keystone token) at a random moment of
   the first `--ramp` seconds, then browses, launches and stops within its quota until
   `--duration` is over (users.py says what it does). Then every user stops its live workload
   and the run waits until none is live (a workload that stays live is reported as stuck).
3. Burst: `--burst` launches sent at once (launch k by user k mod users, so every project gets
   its share and asks for more A100s than its quota has). Checked: no request failed or timed
   out (no 5xx); every refusal is 403 `quota_exceeded`; per project the admitted GPUs never
   exceed the quota, in the database and in the cluster (pods' GPU requests and the namespace's
   ResourceQuota); every admitted workload reaches running, succeeded or failed (with a reason)
   within `--settle` seconds.

Recorded: per endpoint count, throughput, p50/p95/p99 and errors (measure.py defines an error);
the peak memory of every process of the stack (RSS per process, RSS and PSS per role, sampled
every second with psutil); CPU seconds per role; the load average; the busiest processes
outside the stack. Exit status 0 only when the error rate is 0 and every burst check holds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import MemorySampler, Recorder, machine_snapshot  # noqa: E402
from production import ProductionStack  # noqa: E402
from users import (  # noqa: E402
    LIVE,
    PROJECT_QUOTA,
    User,
    identities,
)

SETUP_LIMIT = 900.0  # setup, drain and checks together may take this long beyond the phases


def log(message: str, _started=time.monotonic()) -> None:  # noqa: B008 - the run's clock
    print(f"[{time.monotonic() - _started:7.1f} s] {message}", flush=True)


# --- setup inside the driver: tenants' quotas and namespaces ------------------------------

def django_setup(env: dict[str, str]) -> None:
    for key in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "KEYSTONE_URL",
                "KEYSTONE_SERVICE_PASSWORD", "KUBECONFIG", "PORTAL_SECRET_KEY", "PORTAL_DEBUG",
                "PORTAL_TLS"):
        os.environ[key] = env[key]
    os.environ["PORTAL_LOG_LEVEL"] = "WARNING"  # the driver's own log (httpx logs every request)
    import django

    django.setup()


def tenants_prepare(projects: list[str]) -> dict[str, dict]:
    """The load quota for every load project, and its namespace in shape before any launch."""
    from tenants.models import Tenant
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update

    tenants = {}
    for name in projects:
        tenant = Tenant.objects.get(name=name)
        quota_update(tenant=tenant, acting_user=None, changes=dict(PROJECT_QUOTA))
        tenant_reconcile(tenant_id=tenant.pk)
        tenants[name] = {"id": tenant.pk, "namespace": tenant.namespace}
    return tenants


# --- the phases ---------------------------------------------------------------------------

async def steady(users: list[User], *, duration: float, ramp: float,
                 think: tuple[float, float]) -> dict:
    started = time.monotonic()
    until = started + duration
    signed_in = 0

    async def one(user: User) -> None:
        nonlocal signed_in
        await asyncio.sleep(user.rng.uniform(0, ramp))
        if await user.sign_in():
            signed_in += 1
            await user.browse(until, think)

    await asyncio.gather(*(one(u) for u in users))
    return {"seconds": time.monotonic() - started, "signed_in": signed_in}


async def drain(users: list[User], deadline: float) -> dict:
    """Every user stops its live workload; then wait until the database shows none live."""
    from asgiref.sync import sync_to_async

    from workloads.models import Workload

    started = time.monotonic()
    await asyncio.gather(*(u.stop() for u in users if u.workload and u.workload["state"] in
                           ("submitted", "creating", "pending", "running")))

    def live() -> list[dict]:
        return list(Workload.objects.filter(state__in=LIVE).values(
            "id", "state", "reason", "updated_at", "tenant__name"))

    while True:
        left = await sync_to_async(live)()
        if not left or time.monotonic() - started > deadline:
            return {"seconds": round(time.monotonic() - started, 1), "stuck": [
                {**w, "updated_at": w["updated_at"].isoformat()} for w in left]}
        await asyncio.sleep(1)


async def burst(users: list[User], count: int) -> dict:
    users = [u for u in users if u.signed_in]  # one that never got in has nothing to send
    gate = asyncio.Event()
    results: list[tuple[User, object, float]] = []

    async def one(k: int) -> None:
        user = users[k % len(users)]
        await gate.wait()
        started = time.perf_counter()
        response = await user.launch(run_seconds=3600)
        results.append((user, response, time.perf_counter() - started))

    tasks = [asyncio.create_task(one(k)) for k in range(count)]
    await asyncio.sleep(0.5)  # every task waits at the gate
    began = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    gate.set()
    await asyncio.gather(*tasks)
    admitted: dict[int, str] = {}
    refused: dict[str, int] = {}
    for user, response, _ in results:
        if response is not None and response.status_code == 201:
            admitted[response.json()["id"]] = user.ident.project
        elif response is not None and response.status_code == 403:
            refused[user.ident.project] = refused.get(user.ident.project, 0) + 1
    return {"began": began, "wall_seconds": time.perf_counter() - t0,
            "admitted": admitted, "refused": refused,
            "failed": count - len(admitted) - sum(refused.values())}


def settle(admitted: dict[int, str], began: dt.datetime, deadline: float) -> dict:
    """Wait until every admitted workload is running, succeeded or failed with a reason."""
    from workloads.models import Workload

    started = time.monotonic()
    while True:
        rows = {w["id"]: w for w in Workload.objects.filter(pk__in=list(admitted)).values(
            "id", "state", "reason", "started_at")}
        pending = [w for w in rows.values() if not (
            w["state"] in ("running", "succeeded") or (w["state"] == "failed" and w["reason"]))]
        if not pending or time.monotonic() - started > deadline:
            break
        time.sleep(1)
    to_running = [(w["started_at"] - began).total_seconds() for w in rows.values()
                  if w["started_at"] is not None]
    states: dict[str, int] = {}
    for w in rows.values():
        states[w["state"]] = states.get(w["state"], 0) + 1
    out = {"seconds": round(time.monotonic() - started, 1), "states": states,
           "not_settled": [{"id": w["id"], "state": w["state"], "reason": w["reason"]}
                           for w in pending]}
    if to_running:
        ordered = sorted(to_running)
        out["burst_to_running_s"] = {
            "p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "max": round(ordered[-1], 2)}
    return out


def quota_check(tenants: dict[str, dict], admitted: dict[int, str],
                began: dt.datetime) -> dict:
    """Per project: GPUs admitted in the burst (database) and held in the cluster (pods and the
    ResourceQuota) against the quota. Every number must be ≤ the quota."""
    from kube.client import Kube
    from kube.quantity import parse_quantity
    from workloads.models import Workload

    kube = Kube()
    limit_by_type = PROJECT_QUOTA["gpus_by_type"]
    rows, violations = [], []
    for name, tenant in tenants.items():
        db_rows = Workload.objects.filter(tenant_id=tenant["id"], created_at__gte=began)
        db_by_type: dict[str, int] = {}
        for w in db_rows.values("gpu_type__slug", "gpu_count", "id"):
            db_by_type[w["gpu_type__slug"]] = db_by_type.get(w["gpu_type__slug"], 0) + \
                w["gpu_count"]
        api_admitted = sum(1 for project in admitted.values() if project == name)
        pods = kube.list("Pod", tenant["namespace"])["items"]
        cluster_by_type: dict[str, int] = {}
        for pod in pods:
            if pod["status"].get("phase") in ("Succeeded", "Failed") or \
                    pod["metadata"].get("deletionTimestamp"):
                continue
            gpus = sum(int(parse_quantity(((c.get("resources") or {}).get("requests") or {})
                                          .get("nvidia.com/gpu", "0")))
                       for c in pod["spec"]["containers"])
            slug = (pod["spec"].get("nodeSelector") or {}).get("gputype", "?")
            cluster_by_type[slug] = cluster_by_type.get(slug, 0) + gpus
        quota_used = {}
        for rq in kube.list("ResourceQuota", tenant["namespace"])["items"]:
            used = (rq.get("status") or {}).get("used") or {}
            hard = (rq.get("status") or {}).get("hard") or {}
            if "requests.nvidia.com/gpu" in hard:
                quota_used = {"used": used.get("requests.nvidia.com/gpu"),
                              "hard": hard["requests.nvidia.com/gpu"]}
        row = {"project": name, "db_rows": db_rows.count(), "api_201": api_admitted,
               "db_gpus_by_type": db_by_type, "cluster_gpus_by_type": cluster_by_type,
               "resourcequota_gpu": quota_used}
        rows.append(row)
        if row["db_rows"] != api_admitted:
            violations.append(f"{name}: {row['db_rows']} rows, {api_admitted} answered 201")
        for where, by_type in (("database", db_by_type), ("cluster", cluster_by_type)):
            for slug, gpus in by_type.items():
                if gpus > limit_by_type.get(slug, 0):
                    violations.append(f"{name}: {gpus} {slug} GPUs in the {where}, quota "
                                      f"{limit_by_type.get(slug, 0)}")
            if sum(by_type.values()) > PROJECT_QUOTA["gpus_total"]:
                violations.append(f"{name}: {sum(by_type.values())} GPUs in the {where}")
        if quota_used and int(parse_quantity(quota_used["used"] or "0")) > \
                int(parse_quantity(quota_used["hard"])):
            violations.append(f"{name}: ResourceQuota used {quota_used}")
    return {"rows": rows, "violations": violations}


def server_statuses(logs: Path) -> dict[str, int]:
    """Response statuses as gunicorn's access log has them (the server's side of the count)."""
    counts: dict[str, int] = {}
    for match in re.finditer(r'HTTP/1\.1" (\d{3}) ', (logs / "gunicorn.log").read_text(
            errors="replace")):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def log_findings(logs: Path) -> dict[str, list[str]]:
    """Lines of the stack's logs that say something went wrong (first few per file)."""
    found = {}
    for path in sorted(logs.glob("*.log")):
        lines = [line for line in path.read_text(errors="replace").splitlines()
                 if any(word in line for word in ("Traceback", "ERROR", "CRITICAL",
                                                  "WORKER TIMEOUT", "Error"))]
        if lines:
            found[path.name] = [f"{len(lines)} lines", *lines[:5]]
    return found


# --- the run ------------------------------------------------------------------------------

async def load(args, stack: ProductionStack, rec: Recorder, sampler: MemorySampler) -> dict:
    people = [User(ident, portal=stack.portal_url, keystone=stack.keystone_url, recorder=rec,
                   seed=args.seed * 100_000 + i)
              for i, ident in enumerate(identities(args.users))]
    out: dict = {}
    try:
        log(f"steady load: {args.users} users, {args.duration:.0f} s, think "
            f"{args.think[0]:g}–{args.think[1]:g} s, ramp {args.ramp:.0f} s")
        out["steady"] = await steady(people, duration=args.duration, ramp=args.ramp,
                                     think=args.think)
        out["steady"]["loadavg"] = _loadavg(sampler)
        log(f"steady load done; draining ({sum(u.workload is not None for u in people)} users "
            "launched something)")
        rec.phase = "drain"
        out["drain"] = await drain(people, args.settle)
        log(f"drained in {out['drain']['seconds']} s, stuck: {len(out['drain']['stuck'])}")
        if args.burst:
            rec.phase = "burst"
            log(f"burst: {args.burst} launches at once")
            result = await burst(people, args.burst)
            out["burst"] = {k: v for k, v in result.items() if k not in ("admitted", "began")}
            out["burst"]["admitted"] = len(result["admitted"])
            log(f"burst answered in {result['wall_seconds']:.1f} s: "
                f"{len(result['admitted'])} admitted, {sum(result['refused'].values())} refused, "
                f"{result['failed']} failed")
            from asgiref.sync import sync_to_async

            out["burst"]["settle"] = await sync_to_async(settle)(
                result["admitted"], result["began"], args.settle)
            out["burst"]["quota"] = await sync_to_async(quota_check)(
                args.tenants, result["admitted"], result["began"])
    finally:
        await asyncio.gather(*(u.close() for u in people))
    return out


def _loadavg(sampler: MemorySampler) -> dict:
    values = [v for _, v in sampler.loadavg] or [os.getloadavg()[0]]
    return {"min": min(values), "mean": round(statistics.fmean(values), 2), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--duration", type=float, default=300.0, help="steady phase, seconds")
    parser.add_argument("--ramp", type=float, default=None,
                        help="users sign in over this many seconds (default: duration/10, ≤30)")
    parser.add_argument("--think", default="2,10", help="think time range, seconds")
    parser.add_argument("--burst", type=int, default=300, help="launches at once (0: none)")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds the drain and the burst's workloads may take")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args(argv)
    args.think = tuple(float(x) for x in args.think.split(","))
    if args.ramp is None:
        args.ramp = min(30.0, args.duration / 10)
    random.seed(args.seed)

    def out_of_time(*_):
        raise TimeoutError("the load test ran past its time limit")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.signal(signal.SIGTERM, out_of_time)
    signal.alarm(int(SETUP_LIMIT + args.duration + 2 * args.settle))
    root = Path(tempfile.mkdtemp(prefix="gpu-portal-load-"))
    os.chmod(root, 0o755)  # PostgreSQL runs as `postgres` when we are root
    stack = ProductionStack(root, web_workers=args.web_workers, log=log)
    rec = Recorder()
    figures: dict = {"command": " ".join(["bench/load/load_bench.py", *(argv or sys.argv[1:])]),
                     "date": time.strftime("%Y-%m-%d %H:%M %Z"),
                     "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                                f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, "
                                f"Python {platform.python_version()}"}
    figures["tree"] = _tree_state()
    ok = False
    try:
        idents = identities(args.users)
        from stack.identities import DemoUser

        stack.start_backends(tuple(DemoUser(i.name, i.password, ((i.project, "member"),))
                                   for i in idents))
        django_setup(stack.env)
        projects = sorted({i.project for i in idents})
        args.tenants = tenants_prepare(projects)
        log(f"{len(projects)} projects with the load quota and their namespaces")
        stack.start_portal()
        log(f"portal up at {stack.portal_url} (gunicorn × {args.web_workers}, 2 Celery workers, "
            "tracker, beat)")
        roots = {**stack.roots(), "load driver": os.getpid()}
        figures["others_before"] = machine_snapshot(_pids(roots))
        sampler = MemorySampler(roots)
        sampler.start()
        figures.update(asyncio.run(load(args, stack, rec, sampler)))
        sampler.stop()
        figures["others_after"] = machine_snapshot(_pids(roots))
        figures["loadavg_whole_run"] = _loadavg(sampler)
        figures["memory"] = sampler.report()
        figures["machine_cpu_seconds"] = sampler.machine_cpu_seconds()
        figures["endpoints"] = rec.table("steady", figures["steady"]["seconds"])
        figures["timeline"] = rec.timeline("steady")
        if "burst" in figures:
            figures["burst"]["endpoints"] = rec.table("burst", figures["burst"]["wall_seconds"])
        figures["errors"] = rec.errors
        figures["log_findings"] = log_findings(stack.logs)
        figures["server_statuses"] = server_statuses(stack.logs)
        ok = report(figures)
    finally:
        signal.alarm(0)
        stack.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0 if ok else 1


def _tree_state() -> dict:
    """The commit the run measured, and what in the working tree differed from it."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout

    return {"head": git("rev-parse", "--short", "HEAD").strip(),
            "uncommitted": git("status", "--short").splitlines()}


def _pids(roots: dict[str, int]) -> set[int]:
    import psutil

    pids = set()
    for pid in roots.values():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            pids |= {pid, *(c.pid for c in proc.children(recursive=True))}
    return pids


def report(f: dict) -> bool:
    """Print the figures as Markdown; True when every goal holds."""
    steady = f["steady"]
    print(f"\n## Steady load ({steady['signed_in']} users signed in, {steady['seconds']:.0f} s, "
          f"load average {steady['loadavg']['min']:.1f}–{steady['loadavg']['max']:.1f}, "
          f"mean {steady['loadavg']['mean']})\n")
    print("| endpoint | count | req/s | p50 ms | p95 ms | p99 ms | max ms | refused | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in f["endpoints"]:
        print(f"| {r['endpoint']} | {r['count']} | {r['rps']:.2f} | {r['p50_ms']:.0f} | "
              f"{r['p95_ms']:.0f} | {r['p99_ms']:.0f} | {r['max_ms']:.0f} | {r['refused']} | "
              f"{r['errors']} |")
    total = f["endpoints"][-1]
    error_rate = total["errors"] / total["count"] if total["count"] else 1.0
    print("\n| minute | requests | req/s | p50 ms | p95 ms | p99 ms | errors |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for w in f["timeline"]:
        print(f"| {w['from_s'] / 60:.0f} | {w['count']} | {w['rps']:.1f} | {w['p50_ms']:.0f} | "
              f"{w['p95_ms']:.0f} | {w['p99_ms']:.0f} | {w['errors']} |")
    print(f"\nerror rate {error_rate:.4%} ({total['errors']} of {total['count']})")
    print(f"drain: {f['drain']['seconds']} s, stuck workloads: {f['drain']['stuck']}")
    good = error_rate == 0 and not f["drain"]["stuck"]
    if "burst" in f:
        b = f["burst"]
        print(f"\n## Burst ({b['admitted']} admitted, {sum(b['refused'].values())} refused "
              f"(403 quota_exceeded), {b['failed']} failed; all answered in "
              f"{b['wall_seconds']:.1f} s)\n")
        for r in b["endpoints"]:
            print(f"- {r['endpoint']}: n={r['count']} p50 {r['p50_ms']:.0f} ms, p95 "
                  f"{r['p95_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, max {r['max_ms']:.0f} ms, "
                  f"statuses {r['statuses']}")
        print(f"- settle: {b['settle']}")
        print(f"- quota violations: {b['quota']['violations'] or 'none'}")
        good = good and b["failed"] == 0 and not b["settle"]["not_settled"] and \
            not b["quota"]["violations"]
    print("\n## Peak memory (MiB)\n")
    print("| role | processes seen: peak RSS each | peak RSS sum | peak PSS sum | CPU s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for m in f["memory"]:
        procs = "; ".join(f"{label} {v[0]}" if len(v) == 1 else
                          f"{label} ×{len(v)} {min(v)}–{max(v)}"
                          for label, v in m["processes"].items())
        print(f"| {m['role']} | {procs} | {m['peak_rss_sum_mib']} | {m['peak_pss_sum_mib']} | "
              f"{m['cpu_seconds']} |")
    stack_cpu = sum(m["cpu_seconds"] for m in f["memory"] if m["role"] != "load driver")
    driver_cpu = sum(m["cpu_seconds"] for m in f["memory"] if m["role"] == "load driver")
    print(f"\nCPU seconds while sampling: machine {f['machine_cpu_seconds']} (2 cores), the "
          f"stack {stack_cpu:.0f}, the load driver {driver_cpu:.0f}, everything else "
          f"{f['machine_cpu_seconds'] - stack_cpu - driver_cpu:.0f}; load average "
          f"{f['loadavg_whole_run']}")
    print(f"statuses in gunicorn's access log (whole run): {f['server_statuses']}")
    print(f"others before: {f['others_before']}\nothers after: {f['others_after']}")
    if f["errors"]:
        print("\nfirst errors:\n" + "\n".join(f["errors"]))
    if f["log_findings"]:
        print("\nlog findings:\n" + json.dumps(f["log_findings"], indent=1))
    print(f"\ntree: {f['tree']['head']}, uncommitted: {f['tree']['uncommitted']}")
    print(f"\nverdict: {'PASS' if good else 'FAIL'}")
    return good


if __name__ == "__main__":
    sys.exit(main())
