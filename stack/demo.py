"""`make demo`: the portal with its embedded stack, supervised by honcho, on loopback.

Everything lives under .demo/ at the repo root (logs in .demo/logs/). The first run installs
Keystone into its own virtualenv and bootstraps it (and installs Debian's redis-server when
missing and running as root); later runs reuse all of it and are ready in seconds.

    portal   http://127.0.0.1:8000/
    keystone http://127.0.0.1:5000/v3
    kubesim  http://127.0.0.1:8001   (kubeconfig: .demo/kubeconfig)

`make demo CLUSTER=kube` (`python -m stack.demo --cluster kube`) runs the same demo on a real
Kubernetes 1.37 control plane instead of kubesim (stack/k8s/: etcd, kube-apiserver,
controller-manager, scheduler, KWOK nodes from the same inventory, MetalLB's controller, the GPU
agents, k8s-keystone-auth against the demo's Keystone), its API server on https://127.0.0.1:8001.
.demo/kubeconfig is then an admin's; the portal itself uses its own ServiceAccount
(.demo/kube/portal.kubeconfig). The first run builds the control plane from source (about 20
minutes on two cores, cached in ~/.cache/gpu-portal); its state lives in .demo/kube/. Beside it
runs a second control plane, the worker cluster `east` (2 × 8 H100 KWOK nodes) that the first
one's Kueue dispatches batch work to through MultiKueue; each cluster's admin kubeconfig is at
.demo/clusters/<name>/kubeconfig (`main`, the portal's own, and `east`).

The demo's configuration (its environment, its Keystone, its process list) is built by
`portal_env`, `keystone_install` and `demo_processes` from a `DemoLayout` (a folder and four
ports), so that a test or a benchmark starts the very same configuration on a temporary folder
and free ports (tests/demo/, bench/demo_burst_bench.py).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from honcho.manager import Manager
from honcho.printer import Message, Printer

from .identities import USERS, seed_identities
from .keystone import ADMIN_PASSWORD, SERVICE_PASSWORD, KeystoneInstall
from .oidc_key import ensure_key_file
from .procs import REPO, StackError, http_ok, port_open, wait_for
from .redis import redis_command

if TYPE_CHECKING:
    from .k8s.cluster import ControlPlane

DEMO = REPO / ".demo"
LOGS = DEMO / "logs"
PORTAL_PORT = 8000
KEYSTONE_PORT = 5000
KUBESIM_PORT = 8001
REDIS_PORT = int(os.environ.get("DEMO_REDIS_PORT", "6390"))  # off 6379: leave a site Redis be
INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
GUNICORN_CONF = REPO / "deploy" / "image" / "gunicorn.conf.py"
# Keystone's runner threads. Its work is Python under one GIL, so more threads add no
# throughput; what matters for a burst is its token cache and the portal asking once per
# token (identity/tokens.py). One thread also keeps its SQLite writes (a password
# login writes the user's last_active_at) from failing with "database is locked". Measured
# (bench/results/demo_burst.md): 40 password logins at once, 1 thread 40 of 40 in 2.1 s;
# 4 threads 8 failed (HTTP 500, "database is locked"); 8 threads 15 failed, in 1.9 s.
KEYSTONE_THREADS = 1
# The web server: "gunicorn" (as deployed: deploy/image/gunicorn.conf.py, gthread workers with
# /healthz on a thread of their own: portal/webserver.py) or
# "runserver" (Django's, one threaded process); bench/demo_burst_bench.py --web compares them.
# runserver listens with a backlog of 10: a burst of 54 launches got 14 connections reset;
# gunicorn answered all 54 (12 admitted, 42 refused by quota) in 1.05 s.
WEB_SERVER = "gunicorn"
WEB_WORKERS = 2
WEB_THREADS = 4
# The launch worker's threads: launches (and stops) created at once. Each mostly waits on the
# API server; 16 take a class's burst of notebooks together (bench/results/notebook_burst.md).
LAUNCH_THREADS = 16


# the registries the demo's images come from (PORTAL_IMAGE_REGISTRIES): the seeded templates'
# (NVIDIA's, Jupyter's, TensorFlow's on Docker Hub), and for the custom template Docker Hub's
# official images, NVIDIA's (nvidia/cuda, where most CUDA examples start) and PyTorch's, the MPI
# operator's Open MPI image for the mpi template, Coder's for code-server; anything else
# (`localhost:5000/…`, a look-alike host such as `docker.io.evil.com/…`) is refused at launch
DEMO_REGISTRIES = ("nvcr.io/nvidia", "quay.io/jupyter", "docker.io/library",
                   "docker.io/tensorflow", "docker.io/pytorch", "docker.io/nvidia",
                   "docker.io/mpioperator", "docker.io/codercom")


@dataclasses.dataclass(frozen=True)
class DemoLayout:
    """Where the demo keeps its state and which loopback ports it listens on."""

    root: Path = DEMO
    portal_port: int = PORTAL_PORT
    keystone_port: int = KEYSTONE_PORT
    kubesim_port: int = KUBESIM_PORT
    redis_port: int = REDIS_PORT
    web: str = WEB_SERVER
    cluster: str = "kubesim"  # or "kube": the real control plane (stack/k8s/)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def kube_dir(self) -> Path:
        return self.root / "kube"

    @property
    def clusters_dir(self) -> Path:
        """`--cluster kube`: a folder per cluster, each with its admin kubeconfig (and a
        worker's state)."""
        return self.root / "clusters"

    @property
    def volumes(self) -> Path:
        """The demo's volumes: a folder per namespace, one in it per claim (stack/demo_files.py)."""
        return self.root / "volumes"

    @property
    def files_addresses(self) -> Path:
        return self.root / "files-addresses.json"

    @property
    def database(self) -> Path:
        return self.root / "portal.sqlite3"

    @property
    def portal_url(self) -> str:
        return f"http://127.0.0.1:{self.portal_port}"

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.portal_port, self.keystone_port, self.kubesim_port, self.redis_port)


@dataclasses.dataclass(frozen=True)
class DemoProcess:
    name: str
    argv: list[str]
    env: dict[str, str] | None = None  # None: this process's own environment


class TeePrinter(Printer):
    """honcho's printer, plus a log file per process under .demo/logs/."""

    def __init__(self, output: TextIO, log_dir: Path) -> None:
        super().__init__(output)
        self.log_dir = log_dir
        self._files: dict[str, TextIO] = {}

    def write(self, message: Message) -> None:
        super().write(message)
        name = message.name or "system"
        if name not in self._files:
            self._files[name] = open(self.log_dir / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115
        data = message.data.decode("utf-8", "replace") if isinstance(message.data, bytes) else message.data
        handle = self._files[name]
        handle.write(data if data.endswith("\n") else data + "\n")
        handle.flush()


def _secret_key(layout: DemoLayout) -> str:
    path = layout.root / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64))
        path.chmod(0o600)
    return path.read_text().strip()


def portal_env(layout: DemoLayout = DemoLayout()) -> dict[str, str]:
    """The environment of every portal process of the demo (web, workers, tracker, beat)."""
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        # what a careful site runs: DEBUG off (the portal's own error pages, never Django's
        # debug page with every URL pattern), static files from STATIC_ROOT through
        # WhiteNoise (collected by `collect_static`), images only from DEMO_REGISTRIES
        "PORTAL_DEBUG": "0",
        "PORTAL_STATIC_ROOT": str(layout.root / "static"),
        "PORTAL_IMAGE_REGISTRIES": ",".join(DEMO_REGISTRIES),
        "PORTAL_TLS": "0",
        "PORTAL_SECRET_KEY": _secret_key(layout),
        # SQLite: portal/settings.py makes every SQLite database take concurrent writers
        # (WAL, immediate transactions, a busy timeout); docs/settings.md says how
        "DATABASE_URL": f"sqlite:///{layout.database}",
        "REDIS_URL": f"redis://127.0.0.1:{layout.redis_port}/0",
        "KEYSTONE_URL": f"http://127.0.0.1:{layout.keystone_port}/v3",
        "KEYSTONE_SERVICE_PASSWORD": SERVICE_PASSWORD,
        "KUBECONFIG": str(layout.kubeconfig),
        "CELERY_BEAT_SCHEDULE_FILENAME": str(layout.root / "celerybeat-schedule"),
        # the OpenID Connect provider of the workloads' proxies: its key, made once, and the
        # issuer as the browser reaches the demo (plain HTTP, loopback: the demo says so)
        "PORTAL_OIDC_PRIVATE_KEY_FILE": str(ensure_key_file(layout.root / "oidc-key.pem")),
        "PORTAL_OIDC_ISSUER": f"http://127.0.0.1:{layout.portal_port}/o",
        # a class of students: the address pool (11) must not cap the notebooks, so each gets
        # a host name behind one shared gateway, not an address of its own. The demo runs no
        # gateway: its pods (kubesim's, KWOK's) serve nothing, and their made-up addresses are
        # never sent traffic; tests/realcluster/test_shared_gateway.py runs the real one
        "PORTAL_SERVICE_EXPOSURE": "shared",
        "PORTAL_SERVICE_DOMAIN": "apps.localhost",
        "PORTAL_SERVICE_SCHEME": "http",
        # the projects' file servers run on loopback ports of their own (stack/demo_files.py,
        # the demo's "files" process), named in this file
        "PORTAL_FILES_ADDRESS_FILE": str(layout.files_addresses),
    }


def keystone_install(layout: DemoLayout = DemoLayout()) -> KeystoneInstall:
    """The demo's Keystone: its own state under the layout, the virtualenv shared (.demo/)."""
    return KeystoneInstall(venv=DEMO / "keystone-venv", state_dir=layout.root / "keystone",
                           port=layout.keystone_port, threads=KEYSTONE_THREADS)


def demo_processes(layout: DemoLayout, keystone: KeystoneInstall,
                   env: dict[str, str] | None = None) -> list[DemoProcess]:
    """Every process of the demo, in start order: Keystone, Redis, kubesim, the web server,
    the Celery workers (`celery`; `launches` and `notifications`, portal/celery.py's routes),
    the projects' file servers (`files`), the tracker and beat."""
    env = env if env is not None else portal_env(layout)
    python = sys.executable
    (layout.root / "redis").mkdir(parents=True, exist_ok=True)
    procs = [
        DemoProcess("keystone", keystone.command(), keystone.runner_env()),
        DemoProcess("redis", redis_command(layout.redis_port, layout.root / "redis")),
    ]
    if INVENTORY.exists() and layout.cluster == "kubesim":
        procs.append(DemoProcess("kubesim", [
            python, "-m", "kubesim", "--host", "127.0.0.1", "--port", str(layout.kubesim_port),
            "--inventory", str(INVENTORY), "--kubeconfig", str(layout.kubeconfig),
            "--state-file", str(layout.root / "kubesim-state.json"),
        ], env))
        # the GPU operator's MIG manager and device plugin config, for a maintenance window's
        # re-layout of a node (stack/gpu_operator.py; on the real control plane, its addon)
        procs.append(DemoProcess("gpu-operator", [
            python, "-m", "stack.gpu_operator", "--kubeconfig", str(layout.kubeconfig)], env))
    if layout.web == "gunicorn":
        web = [str(Path(python).parent / "gunicorn"), "portal.wsgi", "--config", str(GUNICORN_CONF),
               # its own control socket: the default (~/.gunicorn/) is shared by every gunicorn
               "--control-socket", str(layout.root / "gunicorn.ctl")]
        web_env = {**env, "PORTAL_WEB_BIND": f"127.0.0.1:{layout.portal_port}",
                   "WEB_CONCURRENCY": str(WEB_WORKERS), "PORTAL_WEB_THREADS": str(WEB_THREADS),
                   # /metrics sums the worker processes (gunicorn.conf.py empties the folder)
                   "PROMETHEUS_MULTIPROC_DIR": str(layout.root / "prometheus")}
    else:
        web = [python, "manage.py", "runserver", f"127.0.0.1:{layout.portal_port}", "--noreload"]
        web_env = env
    procs.append(DemoProcess("web", web, web_env))
    celery = [python, "-m", "celery", "-A", "portal"]
    procs += [
        DemoProcess("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2",
                               "--queues", "celery", "--hostname", "demo-worker@%h"], env),
        # the workloads' cluster I/O (portal/celery.py's `launches` route): threads, since a
        # creation or a stop mostly waits on the API server; a class's burst of notebooks is
        # created together, not two at a time behind the prefork worker's two processes
        DemoProcess("launch-worker", [
            *celery, "worker", "--loglevel", "INFO", "--pool", "threads", "--concurrency",
            str(LAUNCH_THREADS), "--queues", "launches", "--hostname", "demo-launches@%h"], env),
        # the notifications' outside channels (webhook POSTs, e-mail) on workers of their own
        # (portal/celery.py routes them): a dead receiver or a burst of tests holds these, never
        # a launch. Threads: each POST mostly waits on the network
        DemoProcess("notifications-worker", [
            *celery, "worker", "--loglevel", "INFO", "--pool", "threads", "--concurrency", "8",
            "--queues", "notifications", "--hostname", "demo-notifications@%h"], env),
        # what the kubelet does for a project's file server pod: the real gpu-portal-files on
        # a loopback port, serving the project's claims as folders under .demo/volumes/
        DemoProcess("files", [python, "-m", "stack.demo_files", "--root", str(layout.volumes),
                              "--addresses", str(layout.files_addresses)], env),
        # the lifecycle tracker: a long-lived process (reflectors, one reconcile per workload)
        DemoProcess("tracker", [python, "manage.py", "track_workloads"], env),
        DemoProcess("beat", [*celery, "beat", "--loglevel", "INFO",
                             "--schedule", str(layout.root / "celerybeat-schedule")], env),
    ]
    return procs


def prepare(env: dict[str, str]) -> None:
    """The database's migrations, then the static files collected into PORTAL_STATIC_ROOT."""
    migrate(env)
    collect_static(env)


def migrate(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO,
                   env=env, check=True)


def collect_static(env: dict[str, str]) -> None:
    """With DEBUG off the pages name the static files by their hashed names (the manifest),
    as deployed."""
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   cwd=REPO, env=env, check=True)


def seed(layout: DemoLayout, env: dict[str, str], keystone: KeystoneInstall) -> None:
    """Once every part answers: Keystone's demo identities, then the portal's GPU types,
    tenants and demo quotas."""
    keystone.wait_ready(timeout=120)
    seed_identities(keystone.url)
    # with CLUSTER=kube the worker east is registered too, as the portal's own identity there
    workers = ([] if layout.cluster == "kubesim" else
               ["--cluster", f"east={layout.clusters_dir / 'east' / 'portal.kubeconfig'}"])
    subprocess.run([sys.executable, "manage.py", "seed_demo", *workers], cwd=REPO, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    wait_for(lambda: http_ok(f"{layout.portal_url}/healthz"), timeout=120, what="portal")
    if INVENTORY.exists():
        wait_for(lambda: port_open(layout.kubesim_port), timeout=60, what="kubesim")


def _check_ports(layout: DemoLayout) -> None:
    busy = [p for p in layout.ports if port_open(p)]
    if busy:
        raise StackError(f"port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1: "
                         "is another `make demo` running? Stop it first.")


def start_real_cluster(layout: DemoLayout, keystone: KeystoneInstall, env: dict[str, str]
                       ) -> list[ControlPlane]:
    """`--cluster kube`: the real control plane on the kubesim port, its state kept in .demo/kube/
    (etcd on disk: the demo's workloads outlive a restart, as kubesim's state file lets them),
    its Kueue a MultiKueue manager; then the worker cluster `east` (2 × 8 H100 KWOK nodes, its own
    Kueue, JobSet and MPI operator; stack/k8s/multikueue.py), its state in .demo/clusters/east/,
    registered with the manager. Each cluster's admin kubeconfig is at
    .demo/clusters/<name>/kubeconfig; .demo/kubeconfig is the manager's. The portal's processes
    get their own ServiceAccount's kubeconfig and the GPU agents' addresses in `env`. Returns
    the started control planes, the manager first."""
    from .k8s import multikueue
    from .k8s.addons import addon, default_addons
    from .k8s.cluster import ControlPlane
    from .k8s.gpumetrics import GpuMetrics
    from .k8s.kueue import MultiKueueSettings

    # the GPU agents' pod-resources sockets serve gRPC from this process, which then forks the
    # portal's processes: without this, gRPC logs a line per fork
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    print("starting the real control planes, the portal's and the worker east (the first run "
          "builds them from source: about 20 minutes on two cores; later runs start in a minute "
          "or two) …", flush=True)
    cp = ControlPlane(layout.kube_dir, port=layout.kubesim_port, inventory=INVENTORY,
                      addons=default_addons(keystone_url=keystone.url, kueue=True, dra=True,
                                            multikueue=MultiKueueSettings(origin="gpu-portal-demo")),
                      etcd_in_memory=False)
    east = multikueue.worker(layout.clusters_dir / multikueue.EAST, etcd_in_memory=False)
    multikueue.start_together(cp, east)  # both stopped if either fails
    try:
        multikueue.register_workers(cp, {multikueue.EAST: east})
    except BaseException:
        east.stop()
        cp.stop()
        raise
    layout.kubeconfig.write_text(cp.admin_kubeconfig.read_text())
    layout.kubeconfig.chmod(0o600)
    env["KUBECONFIG"] = str(cp.portal_kubeconfig)
    metrics = addon(cp, "gpumetrics")
    assert isinstance(metrics, GpuMetrics)  # one of default_addons
    env["PORTAL_GPU_EXPORTER_URLS"] = ",".join(metrics.urls)
    clusters = {multikueue.MANAGER: cp, multikueue.EAST: east}
    multikueue.write_cluster_kubeconfigs(layout.clusters_dir, clusters)
    print(f"control plane ready in {cp.started_in:.1f} s at {cp.url} (logs: {cp.logs}); "
          f"worker cluster {multikueue.EAST} ready in {east.started_in:.1f} s at {east.url}, "
          f"registered with the manager's MultiKueue (kubeconfigs: {layout.clusters_dir}/)",
          flush=True)
    return list(clusters.values())


def _announce(layout: DemoLayout, env: dict[str, str], keystone: KeystoneInstall,
              started: float) -> None:
    """Wait until every part answers, seed Keystone's demo identities, print the welcome."""
    try:
        seed(layout, env, keystone)
    except (StackError, subprocess.CalledProcessError) as exc:
        print(f"\n!! demo not ready: {exc} (see .demo/logs/)\n", flush=True)
        return
    cluster_line = (f"kubesim   http://127.0.0.1:{layout.kubesim_port}" if layout.cluster == "kubesim"
                    else f"k8s 1.37  https://127.0.0.1:{layout.kubesim_port}")
    workers_line = ("" if layout.cluster == "kubesim" else
                    "\n    worker    east (2 × 8 H100, MultiKueue)   (kubectl --kubeconfig "
                    ".demo/clusters/east/kubeconfig get nodes)")
    accounts = "\n".join(
        f"    {u.name:<11} {u.password:<22} {u.description}" for u in USERS if u.name != "gpu-portal"
    )
    print(f"""
==============================================================================
 GPU portal demo ready in {time.monotonic() - started:.1f} s

    portal    http://127.0.0.1:{layout.portal_port}/
    keystone  {keystone.url}
    {cluster_line}   (kubectl --kubeconfig .demo/kubeconfig get nodes){workers_line}

 Accounts (domain Default):
    admin       {ADMIN_PASSWORD:<22} portal admin (admin on project admin)
{accounts}

 Logs: .demo/logs/   Stop: Ctrl-C
==============================================================================
""", flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", choices=("kubesim", "kube"), default="kubesim",
                        help="kubesim (default) or a real Kubernetes control plane (kube)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    layout = DemoLayout(cluster=args.cluster)
    layout.root.mkdir(exist_ok=True)
    layout.logs.mkdir(exist_ok=True)
    control_planes: list[ControlPlane] = []
    try:
        _check_ports(layout)
        keystone = keystone_install(layout)
        keystone.ensure()
        env = portal_env(layout)
        if layout.cluster == "kube":
            control_planes = start_real_cluster(layout, keystone, env)
        processes = demo_processes(layout, keystone, env)
    except StackError as exc:
        print(f"make demo: {exc}", file=sys.stderr)
        for cp in reversed(control_planes):
            cp.stop()
        return 1
    try:
        return _run(layout, env, keystone, processes, started)
    finally:
        if control_planes:
            print("stopping the control planes …", flush=True)
        for cp in reversed(control_planes):
            cp.stop()


def _run(layout: DemoLayout, env: dict[str, str], keystone: KeystoneInstall,
         processes: list[DemoProcess], started: float) -> int:
    prepare(env)
    manager = Manager(TeePrinter(sys.stdout, layout.logs))
    for process in processes:
        manager.add_process(process.name, shlex.join(process.argv), env=process.env,
                            cwd=str(REPO))
    threading.Thread(target=_announce, args=(layout, env, keystone, started), daemon=True).start()
    manager.loop()
    return manager.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
