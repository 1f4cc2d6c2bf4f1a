"""Lifecycle tracking benchmark (not part of the test suite).

Measures, against a kubesim subprocess over HTTP (official client) and a PostgreSQL server
started here (stack.postgres.PostgresServer, fsync off, like the tests):

1. Kubernetes API requests per tracking run with 10, 1,000 and 5,000 workloads, counted on
   the wire (every HTTP request the ApiClient sends): a fresh tracker's run (a list and a watch
   per kind) and a resumed run (started again: a watch per kind from the stored
   resourceVersions). Goal: the same count at every size. Also the wall time of the relist
   (the lists + the reconcile of every workload against the database).
2. The delay from a pod phase change in kubesim to the workload state in the database, with
   the 5,000 workloads present: GPU batch workloads are launched two per second; an independent
   watch on their pods timestamps each phase change (Pending → Running, Running → Succeeded) and
   a poller of the database (every 20 ms) timestamps the matching workload state. The tracker
   runs as `manage.py track_workloads` does while it leads: its reflectors watch without a gap,
   its worker loop reconciles each changed workload. The launches start once that tracker's
   first lists are done (it watches). Goal: p95 ≤ 2 s.

With `--cluster kube` the same runs against the real control plane (stack/k8s/cluster.py's
ControlPlane: etcd, kube-apiserver, controller-manager, scheduler, KWOK; no addons) with the same
inventory (its Nodes are KWOK's): the tracker and the request counter use the portal's
least-privilege ServiceAccount (portal.kubeconfig); the benchmark's own setup (namespaces, the
background workloads' objects, the lag launches) and the independent pod watch use the admin
kubeconfig, with parallel creates. The controller-manager's client gets a higher rate limit
there (--kube-api-qps/--kube-api-burst, see CONTROLLER_QPS): its default of 20 requests/s
would take longer than the run to create 5,000 Jobs' pods. It prints how long the setup took
(the creates, and until every workload is `running`).

Usage: .venv/bin/python bench/tracking_bench.py [--sizes 10,1000,5000] [--launches 60]
                                                [--cluster kubesim|kube]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.portal_db import start_postgres  # noqa: E402

BULK_INVENTORY = """
nodePools:
  - {name: a100, count: 2, namePrefix: gpu-a100-, labels: {gputype: a100}, cpu: 128,
     memory: 1Ti, gpu: {model: A100-SXM4-80GB, count: 8}, taints: ["nvidia.com/gpu:NoSchedule"]}
  - {name: bulk, count: 50, namePrefix: bulk-, cpu: 128, memory: 1Ti, pods: 110}
addressPools:
  - {name: default, addresses: ["192.168.1.0/24"]}
"""


# the controller-manager's client rate limit on the real control plane (default 20/s, burst 30;
# its Job controller alone makes ~3 requests per Job: the pod, the Job's status, an event)
CONTROLLER_QPS = 200


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU time each process has used so far (its threads included), by name."""
    used = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return used


def cpu_since(before: dict[str, float], pids: dict[str, int]) -> dict[str, float]:
    now = cpu_seconds(pids)
    return {name: round(now[name] - before.get(name, 0.0), 2) for name in now}


def wait_quiet(pids: dict[str, int], *, below: float = 0.2, window: float = 2.0,
               timeout: float = 180.0) -> float:
    """Wait until the cluster's processes together use less than `below` CPUs over a window
    (a real control plane goes on for a while after every pod is Running: the Job controller's
    status updates, events); returns the seconds waited."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        before = cpu_seconds(pids)
        time.sleep(window)
        if sum(cpu_since(before, pids).values()) / window < below:
            break
    return time.monotonic() - began


class GcTimer:
    """Time spent in Python's cyclic garbage collector while it is installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began = 0.0

    def __call__(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_exc) -> None:
        gc.callbacks.remove(self)


class LoadSampler:
    """The 1-minute load average every few seconds (other work shares the machine)."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self.thread.start()

    def _run(self, every: float) -> None:
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(every)

    def summary(self) -> str:
        values = self.samples or [os.getloadavg()[0]]
        return (f"load average (1 min) min {min(values):.2f}, median "
                f"{statistics.median(values):.2f}, max {max(values):.2f} "
                f"({len(values)} samples)")


def start_kubesim(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    inventory = workdir / "inventory.yaml"
    inventory.write_text(BULK_INVENTORY)
    kubeconfig = workdir / "kubeconfig"
    # the demo's kubelet timings (1 s to start a container, 0.5 s to ready)
    cmd = [sys.executable, "-m", "kubesim", "--port", "0", "--log-level", "WARNING",
           "--inventory", str(inventory), "--kubeconfig", str(kubeconfig)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("kubesim listening on "):
        proc.kill()
        raise SystemExit(f"kubesim did not start: {line!r}")
    return proc, str(kubeconfig)


def start_control_plane(workdir: Path):
    from stack.k8s.cluster import ControlPlane

    class BenchControlPlane(ControlPlane):
        def _spawn(self, name, cmd):
            if name == "kube-controller-manager":
                cmd = [*cmd, f"--kube-api-qps={CONTROLLER_QPS}",
                       f"--kube-api-burst={2 * CONTROLLER_QPS}"]
            return super()._spawn(name, cmd)

    inventory = workdir / "inventory.yaml"
    inventory.write_text(BULK_INVENTORY)
    # kubesim's demo kubelet: Running about 1 s after the pod is bound
    cp = BenchControlPlane(workdir / "kube", inventory=inventory, pod_start_seconds=0.5)
    started = time.perf_counter()
    cp.start()
    print(f"real control plane started in {time.perf_counter() - started:.1f} s "
          f"({cp.url})", flush=True)
    return cp


def counting_kube():
    """A Kube whose HTTP requests are counted on the wire. Each answer that is not a watch stream
    is read where it arrives (the caller gets it cached) and goes in `received` as (resource,
    bytes, seconds from sending the request to the body read); the bodies stay in `bodies`."""
    from kubernetes import config

    from kube.client import Kube

    api = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    calls: list[str] = []
    received: list[tuple[str, int, float]] = []
    bodies: list[bytes] = []
    original = api.rest_client.request

    def request(method, url, *args, **kwargs):
        path = url.split("?")[0]
        calls.append(f"{method} {path}")
        began = time.perf_counter()
        response = original(method, url, *args, **kwargs)
        if "watch=true" not in url.lower():
            body = response.read() or b""
            bodies.append(body)
            size = len(body)
            received.append((path.rsplit("/", 1)[-1], size, time.perf_counter() - began))
        return response

    api.rest_client.request = request
    return Kube(api), calls, received, bodies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Bench:
    def __init__(self, admin_kubeconfig: str, cluster_pids: dict[str, int]) -> None:
        from kubernetes import config

        from catalogue.models import GpuType, Template
        from identity.models import User
        from kube.client import Kube
        from tenants.manifests import SERVICE_ACCOUNT_NAME
        from tenants.models import Tenant

        self.admin_kubeconfig = admin_kubeconfig
        self.cluster_pids = cluster_pids  # kubesim, or the control plane's processes
        # the benchmark's own writes (the tracker uses the portal's identity: KUBECONFIG)
        self.kube = Kube(config.new_client_from_config(config_file=admin_kubeconfig))
        self.owner = User.objects.create(username="bench")
        self.template = Template.objects.get(slug="custom")
        # background workloads: CPU-only pods on the bulk nodes, running for the whole run
        self.cpu = GpuType.objects.create(slug="cpu", name="CPU only",
                                          node_selector={"kubesim.io/node-pool": "bulk"})
        self.a100 = GpuType.objects.create(slug="a100", name="A100",
                                           node_selector={"gputype": "a100"})
        self.tenants = {}
        for ns in ("bench-bulk", "bench-lat"):
            self.tenants[ns] = Tenant.objects.create(
                keystone_project_id=uuid.uuid4().hex, name=ns, namespace=ns,
                state=Tenant.State.PROVISIONED)
            self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns}})
            # the pods run as the tenant's ServiceAccount (a real API server's ServiceAccount
            # admission refuses them until it exists; tenant provisioning makes it)
            self.kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": {"name": SERVICE_ACCOUNT_NAME, "namespace": ns}})
        self.count = 0

    def workloads(self, n: int, *, namespace: str, gpu_type, gpus: int, env: dict):
        from kube.labels import workload_object_name
        from workloads.models import Workload

        rows = Workload.objects.bulk_create([
            Workload(tenant=self.tenants[namespace], owner=self.owner, name=f"w{i}",
                     template=self.template, kind="batch", gpu_type=gpu_type, gpu_count=gpus,
                     image="busybox:1.36", env=env, cpu=1, memory_gb=1,
                     state=Workload.State.PENDING) for i in range(n)])
        for row in rows:
            row.object_name = workload_object_name(row.pk, row.name)
        Workload.objects.bulk_update(rows, ["object_name"])
        return Workload.objects.filter(pk__in=[r.pk for r in rows]).select_related(
            "tenant", "owner", "template", "gpu_type")

    def grow_to(self, total: int) -> int:
        """Background workloads up to `total`; returns how many objects were created."""
        from workloads.manifests import workload_objects
        from workloads.objects import workload_spec

        if total <= self.count:
            return 0
        rows = list(self.workloads(total - self.count, namespace="bench-bulk", gpu_type=self.cpu,
                                   gpus=0, env={"KUBESIM_RUN_SECONDS": "100000"}))
        manifests = [obj for row in rows for obj in workload_objects(workload_spec(row))]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self.kube.create, manifests))
        self.count = total
        return len(manifests)


def requests_per_cycle(bench: Bench, sizes: list[int]) -> list[dict]:
    from workloads.models import Workload
    from workloads.tracking.tracker import Tracker

    results = []
    for size in sizes:
        t0 = time.perf_counter()
        objects = bench.grow_to(size)
        created = time.perf_counter() - t0
        # settle: a first tracker brings the database up to date (all pods running)
        warm = Tracker()
        deadline = time.monotonic() + 600
        while True:
            warm.run_for(3.0)
            pending = Workload.objects.filter(tenant__namespace="bench-bulk").exclude(
                state=Workload.State.RUNNING).count()
            if not pending or time.monotonic() > deadline:
                break
        settled = time.perf_counter() - t0
        # the fresh tracker below is alone in memory, as in a new process: the settling
        # tracker's stores would double what the garbage collector walks during the relist
        del warm
        gc.collect()
        quiet = wait_quiet(bench.cluster_pids)  # measure against a cluster at rest
        kube, calls, received, bodies = counting_kube()
        tracker = Tracker(kube)
        # the cluster's own CPU use while nothing is asked of it (5 s), by process
        idle_before = cpu_seconds(bench.cluster_pids)
        time.sleep(5.0)
        cluster_idle = {name: round(used / 5.0, 2) for name, used in
                        cpu_since(idle_before, bench.cluster_pids).items()}
        cluster_before, own_before = cpu_seconds(bench.cluster_pids), time.process_time()
        t0 = time.perf_counter()
        with GcTimer() as collector:
            tracker.start(wait=600)  # what a fresh tracker starts with: a list per kind …
            tracker.drain()  # … and the reconcile of every workload they hold
        relist_seconds = time.perf_counter() - t0
        own_cpu = time.process_time() - own_before
        cluster_cpu = cpu_since(cluster_before, bench.cluster_pids)
        gc.collect()
        gc.disable()  # the same bodies decoded again, apart, without the collector
        decode_began = time.process_time()
        decoded = [json.loads(body) for body in bodies]
        decode_cpu = time.process_time() - decode_began
        gc.enable()
        # what metadata.managedFields (server-side apply's bookkeeping) took of what was listed
        # (the stores drop it)
        managed = sum(len(json.dumps(obj.get("metadata", {}).get("managedFields") or []))
                      for answer in decoded for obj in answer.get("items") or [])
        del decoded
        bodies.clear()
        relist_bytes = sum(size for _, size, _ in received)
        on_wire = {resource: (round(size / 2**20, 1), round(seconds, 2))
                   for resource, size, seconds in received}
        wire_seconds = sum(seconds for _, _, seconds in received)
        time.sleep(2.0)  # then it watches (the stores are current: no second list)
        tracker.stop()
        stats = tracker.stats
        fresh = len(calls)
        calls.clear()
        tracker.run_for(2.0)  # started again, it resumes from the stored resourceVersions
        resumed = len(calls)
        idle_before = cpu_seconds(bench.cluster_pids)  # and again, 5 s more, a little later
        time.sleep(5.0)
        cluster_idle_after = {name: round(used / 5.0, 2) for name, used in
                              cpu_since(idle_before, bench.cluster_pids).items()}
        listed = {kind: len(reflector) for kind, reflector in tracker.reflectors.items()}
        results.append({"workloads": size, "fresh_cycle_requests": fresh,
                        "resumed_cycle_requests": resumed, "relist_s": relist_seconds,
                        "relist_mib": relist_bytes / 2**20, "relist_wire_s": wire_seconds,
                        "relist_by_resource": on_wire, "managed_fields_mib": managed / 2**20,
                        "relist_cpu_s": own_cpu, "relist_json_decode_cpu_s": decode_cpu,
                        "relist_gc_s": collector.seconds,
                        "relist_cluster_cpu_s": cluster_cpu, "cluster_idle_cpus": cluster_idle,
                        "cluster_idle_cpus_after": cluster_idle_after,
                        "objects_created": objects, "create_s": created, "settle_s": settled,
                        "quiet_after_s": quiet,
                        "not_running": pending, "watches": stats.watches,
                        "indexed": listed, "loadavg": os.getloadavg()[0]})
        print(f"{size:>6} workloads: fresh cycle {fresh} requests (relist {relist_seconds:.2f} s, "
              f"{relist_bytes / 2**20:.1f} MiB),"
              f" resumed cycle {resumed} requests; {pending} not running", flush=True)
        print(f"        relist: the lists' answers (request → body read) {wire_seconds:.2f} s "
              f"{on_wire} (MiB, s); the rest (JSON decoding, the view, the database "
              f"reconcile) {relist_seconds - wire_seconds:.2f} s; metadata.managedFields "
              f"{managed / 2**20:.1f} MiB of the lists (not kept)", flush=True)
        print(f"        relist CPU: this process {own_cpu:.2f} s, of which the garbage collector "
              f"{collector.seconds:.2f} s (the lists' JSON decoded again alone, collector off: "
              f"{decode_cpu:.2f} s); the cluster's processes {cluster_cpu} s; the cluster in "
              f"the 5 s before it (CPUs): {cluster_idle}, and 5 s after the two cycles: "
              f"{cluster_idle_after}", flush=True)
        print(f"        setup: {objects} objects created in {created:.1f} s "
              f"({objects / created if created else 0:.0f}/s), all running after {settled:.1f} s, "
              f"the cluster at rest {quiet:.0f} s later;"
              f" the tracker's view: {listed}; load average {os.getloadavg()[0]:.2f}",
              flush=True)
    return results


def latency(bench: Bench, launches: int, rate: float) -> dict:
    from django.db import connection

    from kube.client import Kube
    from kube.labels import LABEL_WORKLOAD_ID
    from workloads.manifests import workload_objects
    from workloads.models import Workload
    from workloads.objects import workload_spec
    from workloads.tracking.index import WATCHED
    from workloads.tracking.tracker import Tracker

    stop = threading.Event()
    seen_pod: dict[tuple[int, str], float] = {}  # (workload id, phase) → monotonic
    seen_db: dict[tuple[int, str], float] = {}

    def observe_pods() -> None:  # independent of the tracker: its own client and watch
        kube = Kube(__import__("kubernetes").config.new_client_from_config(
            config_file=bench.admin_kubeconfig))
        version = None  # carried from stream to stream, so no change is seen late
        while not stop.is_set():
            for event_type, pod in kube.watch("Pod", "bench-lat", resource_version=version,
                                              timeout_seconds=5):
                version = pod["metadata"].get("resourceVersion") or version
                if event_type == "BOOKMARK":
                    continue
                wid = int(pod["metadata"]["labels"][LABEL_WORKLOAD_ID])
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Running", "Succeeded"):
                    seen_pod.setdefault((wid, phase), time.monotonic())

    trackers: list[Tracker] = []

    def track() -> None:  # as `manage.py track_workloads` leads (its lease aside)
        tracker = Tracker()
        trackers.append(tracker)
        tracker.start(wait=0.0)
        while not stop.is_set():
            tracker.step(0.5)
        tracker.stop()
        connection.close()

    def poll_db() -> None:
        mapping = {Workload.State.RUNNING: "Running", Workload.State.SUCCEEDED: "Succeeded"}
        while not stop.is_set():
            now = time.monotonic()
            for wid, state in Workload.objects.filter(
                    tenant__namespace="bench-lat").values_list("id", "state"):
                if state in mapping:
                    seen_db.setdefault((wid, "Running"), now)  # succeeded implies it ran
                    if state == Workload.State.SUCCEEDED:
                        seen_db.setdefault((wid, "Succeeded"), now)
            time.sleep(0.02)
        connection.close()

    threads = [threading.Thread(target=f, daemon=True) for f in (observe_pods, track, poll_db)]
    for thread in threads:
        thread.start()
    # launch once the tracker's first relist of the large view is done and it watches (its
    # watches start only then): a change made during that relist waits for it, which is the
    # relist's cost (measured above), not the lag of a tracker that keeps its view
    began = time.monotonic()
    while not (trackers and trackers[0].stats.watches >= len(WATCHED)):
        if time.monotonic() - began > 120:
            raise RuntimeError("the tracker's first relist took more than 120 s")
        time.sleep(0.05)
    first_relist = time.monotonic() - began
    rows = list(bench.workloads(launches, namespace="bench-lat", gpu_type=bench.a100, gpus=1,
                                env={"KUBESIM_RUN_SECONDS": "3"}))
    for row in rows:
        for obj in workload_objects(workload_spec(row)):
            bench.kube.create(obj)
        time.sleep(1.0 / rate)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(seen_db) < 2 * launches:
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(20)
    delays = {"Running": [], "Succeeded": []}
    for (wid, phase), at in seen_pod.items():
        if (wid, phase) in seen_db:
            delays[phase].append(max(0.0, seen_db[(wid, phase)] - at))
    all_delays = delays["Running"] + delays["Succeeded"]
    result = {"transitions": len(all_delays), "expected": 2 * launches,
              "first_relist_s": round(first_relist, 2), "loadavg_after": os.getloadavg()[0]}
    for name, values in (("running", delays["Running"]), ("succeeded", delays["Succeeded"]),
                         ("all", all_delays)):
        if values:
            result[name] = {"n": len(values), "p50": statistics.median(values),
                            "p95": pct(values, 0.95), "max": max(values)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--launches", type=int, default=60, help="workloads timed for lag")
    parser.add_argument("--rate", type=float, default=2.0, help="launches per second")
    parser.add_argument("--cluster", choices=("kubesim", "kube"), default="kubesim",
                        help="kubesim, or the real control plane (stack/k8s/cluster.py)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    began = time.perf_counter()
    load = LoadSampler()
    workdir = Path(tempfile.mkdtemp(prefix="tracking-bench-"))
    postgres = start_postgres(workdir)
    kubesim = control_plane = None
    if args.cluster == "kube":
        control_plane = start_control_plane(workdir)
        kubeconfig = str(control_plane.portal_kubeconfig)  # the portal's ServiceAccount
        admin_kubeconfig = str(control_plane.admin_kubeconfig)
    else:
        kubesim, kubeconfig = start_kubesim(workdir)
        admin_kubeconfig = kubeconfig
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": postgres.url,
        "PORTAL_SECRET_KEY": "bench-" + "k" * 60, "PORTAL_TLS": "0", "KUBECONFIG": kubeconfig,
    })
    try:
        import django

        django.setup()
        import logging

        logging.getLogger("workloads.tracking").setLevel(logging.WARNING)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        cluster_pids = ({name: p.pid for name, p in control_plane.procs.items()}
                        if control_plane else {"kubesim": kubesim.pid})
        bench = Bench(admin_kubeconfig, cluster_pids)
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; database PostgreSQL ({postgres.url}); cluster: "
              f"{'kube-apiserver (real control plane)' if control_plane else 'kubesim'}",
              flush=True)
        counts = requests_per_cycle(bench, sizes)
        lag = latency(bench, args.launches, args.rate)
        print("lag (s):", {k: v for k, v in lag.items()}, flush=True)
        print("requests:", counts, flush=True)
        print(f"{load.summary()}; whole run {time.perf_counter() - began:.0f} s", flush=True)
        if args.json:
            args.json.write_text(json.dumps({
                "cluster": args.cluster, "cycles": counts, "lag": lag,
                "load": load.samples, "seconds": time.perf_counter() - began}, indent=2))
    finally:
        load.stop.set()
        if kubesim is not None:
            kubesim.terminate()
            kubesim.wait(10)
        if control_plane is not None:
            control_plane.stop()
        postgres.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
