#!/usr/bin/env python
"""Launch overhead: a 1-GPU batch Job launched through the portal's API against the raw
`kubernetes` client creating the same objects, in the same run.

    .venv/bin/python bench/launch_bench.py [--launches 30] [--warmup 3] [--cluster kubesim|kube]
                                           [--json out.json]

It starts everything it needs on loopback under a temporary folder and stops it at the end:
PostgreSQL (fsync on), Redis, Keystone (its own fresh state; the virtualenv under .demo/ is reused),
the cluster with the demo inventory, the portal (gunicorn when the venv has it, else
`manage.py runserver --noreload` with PORTAL_DEBUG=0) and one Celery worker (no beat: the
tracker would add its own load). The cluster is kubesim (`--cluster kubesim`, the default) or the
real control plane (`--cluster kube`: stack/k8s/cluster.py's ControlPlane — etcd, kube-apiserver,
controller-manager, scheduler, KWOK — without addons, none of which is on the launch path); there
the portal, the raw path and the watch all use the portal's least-privilege ServiceAccount
(`portal.kubeconfig`), never the admin. Then, alternating, it runs N launches of each path:

- portal: `POST /api/v1/workloads/` as researcher in vision-lab (a Keystone token in
  X-Auth-Token, reused as a script would), clock from sending the request to the Job being
  seen in the cluster; then the workload is stopped and the next waits until it is gone.
- raw: the dicts of `workloads.manifests.workload_objects` for the same spec (only
  the name and workload-id label differ), created with the official client from one long-lived
  ApiClient, clock from the call to the Job being seen; then it is deleted.

"Seen" is the same for both: the arrival of the Job's ADDED event on one watch of the
namespace (official client, raw stream, timestamped as the line arrives). The portal path is
also cut into parts from timestamps taken where they happen: the Submitted event the request
writes inside its transaction, the HTTP response, and the worker's task_received /
task_prerun / task_postrun signals (the worker is `celery -A portal worker` started through
this script so that it can listen to them; nothing else changes). The web server is started
through the script too (`launch_bench.py web MARKS -- gunicorn …`: gunicorn's own runner, after
the marks are in place in the master process its workers fork from).

`python bench/launch_bench.py worker TIMINGS -- <celery worker args>` is that worker.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
CREATE_TASK = "workloads.tasks.workload_create_task"
TENANT = "vision-lab"
USER, PASSWORD = "researcher", "researcher-demo-pass"
WAIT = 30.0  # seconds any single step may take before the run is declared broken
RUN_LIMIT = 900.0  # the whole run, setup included


# --- the portal's processes, with timestamps ----------------------------------------------
# Both are the ordinary processes (`manage.py runserver`, `celery -A portal worker`) started
# through this script so that a few functions of the launch path can be wrapped to write a
# timestamp before and after they run; nothing they do changes. One JSON line per mark:
# {"key": "b:<bench request id>" | "w:<workload id>", "mark": …, "t": wall clock}.

def _mark_writer(path: str):
    lock = threading.Lock()
    out = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the process

    def write(key: str | None, mark: str) -> None:
        if key is None:
            return
        line = json.dumps({"key": key, "mark": mark, "t": time.time()})
        with lock:
            out.write(line + "\n")

    return write


def _wrap(owner, name: str, before: str, after: str, key_of, write) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        key = key_of(*args, **kwargs)
        write(key, before)
        try:
            return original(*args, **kwargs)
        finally:
            write(key, after)

    setattr(owner, name, wrapper)


def run_web(marks: str, argv: list[str]) -> None:
    """`manage.py <argv>` (runserver), or gunicorn when argv starts with "gunicorn", marking
    authentication, validation, admission and the enqueue of requests that carry an
    X-Bench-Id header."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import execute_from_command_line

    from api.authentication import KeystoneTokenAuthentication
    from workloads.api import views as api_views
    from workloads.api.serializers import LaunchSerializer
    from workloads.tasks import workload_create_task

    write = _mark_writer(marks)
    current = threading.local()  # the bench id of the request this thread serves

    def request_key(_self, request):
        bench_id = request.META.get("HTTP_X_BENCH_ID")
        current.key = f"b:{bench_id}" if bench_id else None
        return current.key

    def same_request(*_args, **_kwargs):
        return getattr(current, "key", None)

    _wrap(KeystoneTokenAuthentication, "authenticate", "auth_start", "auth_end", request_key,
          write)
    _wrap(LaunchSerializer, "is_valid", "validate_start", "validate_end", same_request, write)
    _wrap(api_views, "workload_launch", "launch_start", "launch_end", same_request, write)
    _wrap(workload_create_task, "delay", "enqueue_start", "enqueue_end", same_request, write)
    if argv[:1] == ["gunicorn"]:  # its workers fork from this process: the marks go with them
        from gunicorn.app.wsgiapp import run

        sys.argv = argv
        run()
        return
    execute_from_command_line(["manage.py", *argv])


def run_worker(marks: str, celery_args: list[str]) -> None:
    """`celery -A portal worker <celery_args>`, marking each create task as it is received,
    starts, sends its create request to the cluster, gets the answer, and ends."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from celery import signals

    from kube.client import Kube
    from kube.labels import LABEL_WORKLOAD_ID
    from portal.celery import app

    write = _mark_writer(marks)

    def task_key(name, args) -> str | None:
        return f"w:{args[0]}" if name == CREATE_TASK and args else None

    def on_received(sender=None, request=None, **_):
        write(task_key(request.name, request.args), "received")

    def on_prerun(sender=None, task=None, args=None, **_):
        write(task_key(task.name, args), "start")

    def on_postrun(sender=None, task=None, args=None, **_):
        write(task_key(task.name, args), "end")

    def object_key(_self, obj, *_args, **_kwargs):
        workload_id = (obj.get("metadata", {}).get("labels") or {}).get(LABEL_WORKLOAD_ID)
        return f"w:{workload_id}" if workload_id else None

    signals.task_received.connect(on_received, weak=False)
    signals.task_prerun.connect(on_prerun, weak=False)
    signals.task_postrun.connect(on_postrun, weak=False)
    _wrap(Kube, "create", "create_start", "create_end", object_key, write)
    app.worker_main(["worker", *celery_args])


# --- the stack ----------------------------------------------------------------------------

class Stack:
    """Every process of the run; stopped in reverse order, whatever happens."""

    def __init__(self, root: Path, cluster: str = "kubesim") -> None:
        self.root = root
        self.cluster = cluster
        self.control_plane = None  # the real one, with --cluster kube
        self.logs = root / "logs"
        self.logs.mkdir()
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.postgres = None
        self.env: dict[str, str] = {}
        self.python = sys.executable

    def popen(self, name: str, cmd: list[str], **kwargs) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, **kwargs)
        self.procs.append((name, proc))
        return proc

    def close(self) -> None:
        from stack.procs import stop

        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            stop(proc, timeout=10)
        if self.control_plane is not None:
            self.control_plane.stop()
        if self.postgres is not None:
            self.postgres.destroy()

    def start(self) -> None:
        from stack.identities import seed_identities
        from stack.keystone import SERVICE_PASSWORD, KeystoneInstall
        from stack.postgres import PostgresServer
        from stack.procs import free_port, http_ok, wait_for
        from stack.redis import start_redis

        step = _stepper()
        self.postgres = PostgresServer(self.root / "pg" / "data", free_port())
        (self.root / "pg").mkdir(mode=0o755)
        self.postgres.start(self.logs / "postgres.log", durable=True)  # fsync on, as deployed
        step("postgres")
        redis_port = free_port()
        redis = start_redis(redis_port, self.root / "redis", self.logs / "redis.log")
        self.procs.append(("redis", redis))
        step("redis")
        keystone = KeystoneInstall(venv=REPO / ".demo" / "keystone-venv",
                                   state_dir=self.root / "keystone", port=free_port())
        keystone.ensure()
        self.procs.append(("keystone", keystone.start(self.logs / "keystone.log")))
        seed_identities(keystone.url)
        step("keystone (bootstrap + identities)")
        if self.cluster == "kube":
            from stack.k8s.cluster import ControlPlane

            # no addons: MetalLB, the GPU agents and keystone-auth are not on the launch path
            self.control_plane = ControlPlane(self.root / "kube", inventory=INVENTORY)
            self.control_plane.start()
            kubeconfig = self.control_plane.portal_kubeconfig  # the portal's ServiceAccount
            step(f"real control plane (started in {self.control_plane.started_in:.1f} s)")
        else:
            kubeconfig = self.root / "kubeconfig"
            kubesim = self.popen("kubesim", [
                self.python, "-m", "kubesim", "--host", "127.0.0.1", "--port", "0",
                "--kubeconfig", str(kubeconfig), "--inventory", str(INVENTORY)])
            log = self.logs / "kubesim.log"
            wait_for(lambda: "kubesim listening on" in log.read_text(errors="replace")
                     and kubeconfig.exists(), timeout=WAIT, what="kubesim", proc=kubesim)
            step("kubesim")
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_DEBUG": "0",
            "PORTAL_TLS": "0",
            "PORTAL_SECRET_KEY": secrets.token_urlsafe(64),
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "KEYSTONE_URL": keystone.url,
            "KEYSTONE_SERVICE_PASSWORD": SERVICE_PASSWORD,
            "KUBECONFIG": str(kubeconfig),
            "CELERY_BEAT_SCHEDULE_FILENAME": str(self.root / "celerybeat-schedule"),
        }
        self.manage("migrate", "--noinput", "-v", "0")
        self.manage("seed_demo")
        self.manage("shell", "-c",
                    "from tenants.models import Tenant\n"
                    "from tenants.provisioning import tenant_reconcile\n"
                    f"t = Tenant.objects.get(name={TENANT!r})\n"
                    "tenant_reconcile(tenant_id=t.pk)")
        step("migrate, seed_demo, namespace of vision-lab")
        port = free_port()
        self.portal_url = f"http://127.0.0.1:{port}"
        self.marks = self.root / "marks.jsonl"
        self.marks.touch()
        web = [self.python, str(Path(__file__).resolve()), "web", str(self.marks), "--"]
        if (Path(self.python).parent / "gunicorn").exists():
            self.web_server = "gunicorn portal.wsgi (2 sync workers, PORTAL_DEBUG=0)"
            cmd = [*web, "gunicorn", "portal.wsgi:application", "--bind", f"127.0.0.1:{port}",
                   "--workers", "2"]
        else:
            self.web_server = ("manage.py runserver --noreload (threaded; PORTAL_DEBUG=0; "
                               "gunicorn is not installed in the venv)")
            cmd = [*web, "runserver", f"127.0.0.1:{port}", "--noreload"]
        web = self.popen("web", cmd, env=self.env)
        wait_for(lambda: http_ok(f"{self.portal_url}/healthz"), timeout=WAIT, what="portal",
                 proc=web)
        step("portal")
        self.popen("worker", [
            self.python, str(Path(__file__).resolve()), "worker", str(self.marks), "--",
            "--loglevel", "INFO", "--concurrency", "2", "--hostname", "launch-bench@%h"],
            env=self.env)
        step("worker started")

    def manage(self, *args: str) -> None:
        result = subprocess.run([self.python, "manage.py", *args], cwd=REPO, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{result.stdout[-3000:]}")


def _stepper():
    started = time.monotonic()

    def step(what: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {what}", flush=True)

    return step


# --- what the clock watches ---------------------------------------------------------------

class JobWatch:
    """One watch on the namespace's Jobs; the arrival time of each ADDED and DELETED."""

    def __init__(self, api_client, namespace: str) -> None:
        from kubernetes import client as k8s

        self.api = k8s.BatchV1Api(api_client)
        self.namespace = namespace
        self.added: dict[str, tuple[float, float]] = {}  # name -> (perf_counter, wall)
        self.deleted: set[str] = set()
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        listing = json.loads(self.api.list_namespaced_job(namespace, _preload_content=False).data)
        self.resource_version = listing["metadata"]["resourceVersion"]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            response = self.api.list_namespaced_job(
                self.namespace, watch=True, resource_version=self.resource_version,
                timeout_seconds=int(RUN_LIMIT), _preload_content=False,
                _request_timeout=(3, RUN_LIMIT + 10))
            pending = b""
            for chunk in response.stream(amt=None, decode_content=False):
                arrived = (time.perf_counter(), time.time())
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._event(json.loads(line), arrived)
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting side
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def _event(self, event: dict, arrived: tuple[float, float]) -> None:
        name = (event.get("object") or {}).get("metadata", {}).get("name")
        with self.cond:
            if event.get("type") == "ADDED":
                self.added.setdefault(name, arrived)
            elif event.get("type") == "DELETED":
                self.deleted.add(name)
            self.cond.notify_all()

    def wait(self, predicate, what: str):
        deadline = time.monotonic() + WAIT
        with self.cond:
            while True:
                result = predicate()
                if result:
                    return result
                if self.error is not None:
                    raise RuntimeError(f"the watch broke off: {self.error!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"timed out waiting for {what}")
                self.cond.wait(left)

    def wait_added(self, name: str) -> tuple[float, float]:
        return self.wait(lambda: self.added.get(name), f"Job {name} to appear")

    def wait_deleted(self, name: str) -> None:
        self.wait(lambda: name in self.deleted, f"Job {name} to go")


# --- the two paths ------------------------------------------------------------------------

@dataclasses.dataclass
class Sample:
    total: float  # seconds, request/call -> Job seen on the watch
    returned: float  # seconds, request/call -> response/return
    parts: dict[str, float] = dataclasses.field(default_factory=dict)  # portal only


class PortalPath:
    def __init__(self, url: str, token: str, watch: JobWatch, marks: Path) -> None:
        import requests

        self.url = url
        self.session = requests.Session()  # keep-alive where the server allows it
        self.session.headers["X-Auth-Token"] = token
        self.watch = watch
        self.marks = marks
        self.requests = 0

    def body(self, name: str) -> dict:
        return {"name": name, "template": "custom", "kind": "batch", "image": "busybox:1.36",
                "gpu_type": "v100", "gpu_count": 1, "command": ["sleep", "1"]}

    def launch(self, name: str) -> tuple[Sample, int]:
        self.requests += 1
        bench_id = str(self.requests)
        wall0 = time.time()
        t0 = time.perf_counter()
        response = self.session.post(f"{self.url}/api/v1/workloads/", json=self.body(name),
                                     headers={"X-Bench-Id": bench_id}, timeout=WAIT)
        t1 = time.perf_counter()
        if response.status_code != 201:
            raise RuntimeError(f"launch answered {response.status_code}: {response.text[:500]}")
        data = response.json()
        seen, seen_wall = self.watch.wait_added(data["object_name"])
        sample = Sample(total=seen - t0, returned=t1 - t0)
        sample.parts = self._marks(bench_id, data["id"], wall0)
        sample.parts["response"] = t1 - t0
        sample.parts["seen"] = seen_wall - wall0
        return sample, data["id"]

    def _marks(self, bench_id: str, workload_id: int, wall0: float) -> dict[str, float]:
        """Offsets (s) from sending the request of the marks the web process wrote for it and
        the worker wrote for its workload (waiting for the task's last mark)."""
        keys = {f"b:{bench_id}", f"w:{workload_id}"}
        deadline = time.monotonic() + WAIT
        while True:
            marks: dict[str, float] = {}
            for line in self.marks.read_text().splitlines():
                entry = json.loads(line)
                if entry["key"] in keys:
                    marks.setdefault(entry["mark"], entry["t"] - wall0)
            if "end" in marks or time.monotonic() > deadline:
                return marks
            time.sleep(0.01)

    def stop(self, workload_id: int, object_name: str) -> None:
        from workloads.models import Workload

        response = self.session.post(f"{self.url}/api/v1/workloads/{workload_id}/stop/",
                                     timeout=WAIT)
        if response.status_code != 202:
            raise RuntimeError(f"stop answered {response.status_code}: {response.text[:500]}")
        self.watch.wait_deleted(object_name)
        deadline = time.monotonic() + WAIT
        while not Workload.objects.filter(pk=workload_id, state=Workload.State.STOPPED).exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"workload {workload_id} not stopped after {WAIT:.0f} s")
            time.sleep(0.02)


class RawPath:
    """The official client, as a script would use it: one ApiClient, dict bodies, no model
    deserialisation of the answer (the portal's own client does not deserialise either)."""

    def __init__(self, api_client, watch: JobWatch, spec) -> None:
        from kubernetes import client as k8s

        self.core = k8s.CoreV1Api(api_client)
        self.batch = k8s.BatchV1Api(api_client)
        self.apps = k8s.AppsV1Api(api_client)
        self.watch = watch
        self.spec = spec

    def objects(self, index: int) -> list[dict]:
        from workloads.manifests import workload_objects

        spec = dataclasses.replace(self.spec, name=f"raw-bench-{index}",
                                   workload_id=900_000 + index)
        return workload_objects(spec)

    def create(self, obj: dict) -> None:
        namespace = obj["metadata"]["namespace"]
        create = {
            "Secret": self.core.create_namespaced_secret,
            "Service": self.core.create_namespaced_service,
            "Deployment": self.apps.create_namespaced_deployment,
            "Job": self.batch.create_namespaced_job,
        }[obj["kind"]]
        create(namespace, obj, _preload_content=False)

    def launch(self, index: int) -> tuple[Sample, list[dict]]:
        objects = self.objects(index)  # built before the clock starts: the portal's task
        # builds them inside its measured time, which is part of its overhead
        t0 = time.perf_counter()
        for obj in objects:
            self.create(obj)
        t1 = time.perf_counter()
        job = next(o for o in objects if o["kind"] == "Job")
        seen, _ = self.watch.wait_added(job["metadata"]["name"])
        return Sample(total=seen - t0, returned=t1 - t0), objects

    def remove(self, objects: list[dict]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            if obj["kind"] == "Job":
                self.batch.delete_namespaced_job(meta["name"], meta["namespace"],
                                                 propagation_policy="Background",
                                                 _preload_content=False)
                self.watch.wait_deleted(meta["name"])
            elif obj["kind"] == "Secret":
                self.core.delete_namespaced_secret(meta["name"], meta["namespace"],
                                                   _preload_content=False)


# --- figures ------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def describe(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": pct(values, 95),
            "mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def report(portal: list[Sample], raw: list[Sample], meta: dict) -> dict:
    out = {"meta": meta,
           "portal_total": describe([s.total for s in portal]),
           "portal_response": describe([s.returned for s in portal]),
           "raw_total": describe([s.total for s in raw]),
           "raw_return": describe([s.returned for s in raw])}
    out["ratio_p50"] = out["portal_total"]["p50"] / out["raw_total"]["p50"]
    # the portal path in parts: the median of each step's own duration, in the order they
    # happen; those marked * are on the clock's path (they add up to the total)
    steps = [
        ("* request sent → authentication starts (HTTP, middleware)", None, "auth_start"),
        ("* authentication (token cache, tenant, user mirror)", "auth_start", "auth_end"),
        ("* view until validation (role, tenant, quota reads)", "auth_end", "validate_start"),
        ("* validation (serializer, node capacity from the cluster)", "validate_start",
         "validate_end"),
        ("* validated → admission starts", "validate_end", "launch_start"),
        ("* admission transaction until its commit (tenant lock, quota checks, insert, event, "
         "audit)", "launch_start", "enqueue_start"),
        ("* enqueue on commit (publish to Redis)", "enqueue_start", "enqueue_end"),
        ("* published → worker receives", "enqueue_end", "received"),
        ("* received → task starts (prefork pool hand-off)", "received", "start"),
        ("* task starts → create request sent (claim, fetch, spec, manifests)", "start",
         "create_start"),
        (f"* create request to {meta['cluster']} (the Job)", "create_start", "create_end"),
        ("* create answered → Job seen on the watch", "create_end", "seen"),
        ("  enqueued → HTTP 201 received (serialise, reply)", "enqueue_end", "response"),
        ("  create answered → task ends (state update, Created event)", "create_end", "end"),
    ]
    parts = {}
    for label, begin, end in steps:
        values = [s.parts[end] - (s.parts[begin] if begin else 0.0) for s in portal
                  if end in s.parts and (begin is None or begin in s.parts)]
        if values:
            parts[label] = describe(values)
    out["portal_parts"] = parts
    print()
    print(f"| path (n={len(portal)} each) | p50 ms | p95 ms | mean ms | min ms | max ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, key in (("portal: request → Job seen", "portal_total"),
                       ("portal: request → HTTP 201", "portal_response"),
                       ("raw client: call → Job seen", "raw_total"),
                       ("raw client: call → return", "raw_return")):
        d = out[key]
        print(f"| {label} | {ms(d['p50'])} | {ms(d['p95'])} | {ms(d['mean'])} | "
              f"{ms(d['min'])} | {ms(d['max'])} |")
    print(f"\n{meta['cluster_detail']}; {meta['web']}; {meta['worker']}; load average {meta['loadavg_before']} before, "
          f"{meta['loadavg_after']} after")
    print(f"\nratio of medians (portal / raw, request → Job seen): {out['ratio_p50']:.2f}×")
    print("\n| portal path, part | p50 ms | p95 ms | mean ms |")
    print("| --- | ---: | ---: | ---: |")
    for label, d in parts.items():
        print(f"| {label} | {ms(d['p50'])} | {ms(d['p95'])} | {ms(d['mean'])} |")
    return out


# --- the run ------------------------------------------------------------------------------

def keystone_token(url: str) -> str:
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=url, username=USER, password=PASSWORD, user_domain_id="default",
                       project_name=TENANT, project_domain_id="default")
    return auth.get_access(ks_session.Session(auth=auth)).auth_token


def token_cache_counts(portal_url: str) -> dict[str, float] | None:
    """The portal's token-cache counters from /metrics, when it serves them."""
    counts = {}
    try:
        with urllib.request.urlopen(f"{portal_url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("portal_keystone_token_cache_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('"')[1]] = float(value)
    return counts


def cluster_names(stack: Stack) -> tuple[str, str]:
    """A short name for the tables and a description of the cluster."""
    if stack.control_plane is None:
        return "kubesim", "kubesim (demo inventory)"
    from stack.k8s.build import KUBERNETES_VERSION

    return "kube-apiserver", (f"kube-apiserver {KUBERNETES_VERSION}, the portal's ServiceAccount "
                              "token (RBAC), etcd in /dev/shm, KWOK nodes (demo inventory)")


def bench(stack: Stack, launches: int, warmup: int) -> dict:
    for key in ("DATABASE_URL", "REDIS_URL", "KEYSTONE_URL", "KEYSTONE_SERVICE_PASSWORD",
                "KUBECONFIG", "PORTAL_SECRET_KEY", "PORTAL_DEBUG", "PORTAL_TLS",
                "DJANGO_SETTINGS_MODULE"):
        os.environ[key] = stack.env[key]
    import django

    django.setup()
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from tenants.models import Tenant
    from workloads.models import Workload
    from workloads.objects import workload_spec

    namespace = Tenant.objects.get(name=TENANT).namespace

    def new_client():
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=stack.env["KUBECONFIG"],
                                    client_configuration=configuration)
        return k8s.ApiClient(configuration)

    watch = JobWatch(new_client(), namespace)
    token = keystone_token(stack.env["KEYSTONE_URL"])
    portal = PortalPath(stack.portal_url, token, watch, stack.marks)
    raw_client = new_client()

    load_before = os.getloadavg()  # other work on the machine shows in the figures
    portal_samples: list[Sample] = []
    raw_samples: list[Sample] = []
    raw: RawPath | None = None
    step = _stepper()
    for index in range(warmup + launches):
        measured = index >= warmup
        # alternate which path goes first, so neither always follows the other's clean-up
        order = ("portal", "raw") if index % 2 == 0 else ("raw", "portal")
        for path in order:
            if path == "portal":
                sample, workload_id = portal.launch(f"bench {index}")
                workload = Workload.objects.select_related(
                    "tenant", "owner", "template", "gpu_type").get(pk=workload_id)
                if raw is None:
                    raw = RawPath(raw_client, watch, workload_spec(workload))
                portal.stop(workload_id, workload.object_name)
                if measured:
                    portal_samples.append(sample)
            elif raw is not None:
                sample, objects = raw.launch(index)
                raw.remove(objects)
                if measured:
                    raw_samples.append(sample)
            time.sleep(0.1)  # let the cluster's controllers settle (pod GC) before the next
        if index + 1 == warmup:
            step(f"{warmup} warm-up launches of each path done")
    step(f"{launches} measured launches of each path done")
    node_list = list_nodes_alone(raw_client, launches)
    meta = {"launches": launches, "warmup": warmup, "web": stack.web_server,
            "cluster": cluster_names(stack)[0], "cluster_detail": cluster_names(stack)[1],
            "worker": "celery -A portal worker --concurrency 2 (prefork)",
            "token_cache": token_cache_counts(stack.portal_url),
            "nproc": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    out = report(portal_samples, raw_samples, meta)
    out["node_list"] = node_list
    print(f"\nlist nodes alone (the cluster call of the launch's validation), raw client, "
          f"n={launches}: p50 {ms(node_list['p50'])} ms, p95 {ms(node_list['p95'])} ms; "
          f"{node_list['nodes']} nodes, {node_list['bytes'] / 1024:.1f} KiB, of which "
          f"metadata.managedFields {node_list['managed_fields_bytes'] / 1024:.1f} KiB")
    return out


def list_nodes_alone(api_client, times: int) -> dict:
    """The launch's validation asks the cluster for its nodes (capacity): that call alone."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api_client)
    seconds = []
    for _ in range(times):
        began = time.perf_counter()
        data = core.list_node(_preload_content=False).data
        nodes = json.loads(data)["items"]
        seconds.append(time.perf_counter() - began)
    managed = sum(len(json.dumps(n["metadata"].get("managedFields") or [])) for n in nodes)
    return describe(seconds) | {"nodes": len(nodes), "bytes": len(data),
                                "managed_fields_bytes": managed}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("web", "worker"):
        run = run_web if argv[0] == "web" else run_worker
        run(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=30, help="measured launches per path")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured launches per path")
    parser.add_argument("--cluster", choices=("kubesim", "kube"), default="kubesim",
                        help="kubesim, or the real control plane (stack/k8s/cluster.py)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args(argv)

    def out_of_time(*_):
        raise TimeoutError(f"the run took more than {RUN_LIMIT:.0f} s")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(RUN_LIMIT))
    root = Path(tempfile.mkdtemp(prefix="gpu-portal-launch-bench-"))
    os.chmod(root, 0o755)  # PostgreSQL runs as `postgres` when we are root
    stack = Stack(root, args.cluster)
    try:
        stack.start()
        figures = bench(stack, args.launches, args.warmup)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
    finally:
        signal.alarm(0)
        stack.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
