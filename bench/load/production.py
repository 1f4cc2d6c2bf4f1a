"""The portal run the production way, on loopback, for the load test.

PostgreSQL (fsync on), Redis, Keystone (fresh state; the virtualenv under .demo/ is reused) with
the load test's identities, kubesim with bench/load/inventory.yaml, then the portal's processes
as deploy/base/ runs them: gunicorn (`portal.wsgi` with the image's deploy/image/gunicorn.conf.py:
gthread workers, 4 threads each; PORTAL_DEBUG=0; static files hashed by collectstatic and served
by WhiteNoise), two Celery workers on the `celery` queue (`--concurrency 4` each) and a launch
worker on `launches` (16 threads), as deploy/base/workers.yaml, the lifecycle tracker
(`manage.py track_workloads`) and beat, logging at INFO as deployed. Every port is a free one on
127.0.0.1; every process runs in its own session and is stopped by close(), whatever happened.

It is built from the stack/ helpers (PostgresServer, start_redis, KeystoneInstall,
seed_identities); only the process list is its own.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from stack.identities import DemoUser, seed_identities  # noqa: E402
from stack.keystone import SERVICE_PASSWORD, KeystoneInstall  # noqa: E402
from stack.postgres import PostgresServer  # noqa: E402
from stack.procs import free_port, http_ok, stop, wait_for  # noqa: E402
from stack.redis import start_redis  # noqa: E402

INVENTORY = Path(__file__).resolve().parent / "inventory.yaml"
GUNICORN_CONF = REPO / "deploy" / "image" / "gunicorn.conf.py"
WAIT = 120.0


class ProductionStack:
    """Two halves: start_backends() (database, broker, identity, cluster, schema, seed), then
    — after the caller has shaped tenants and quotas — start_portal() (web, workers, beat)."""

    def __init__(self, root: Path, *, web_workers: int = 4, celery_workers: int = 2,
                 concurrency: int = 4, inventory: Path = INVENTORY, log: Callable[[str], None] = print) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.web_workers = web_workers
        self.celery_workers = celery_workers
        self.concurrency = concurrency
        self.inventory = inventory
        self.log = log
        self.procs: dict[str, subprocess.Popen] = {}  # role -> process, in start order
        self.postgres: PostgresServer | None = None
        self.keystone_url = ""
        self.portal_url = ""
        self.env: dict[str, str] = {}
        self.python = sys.executable

    # --- processes --------------------------------------------------------------------
    def _popen(self, role: str, cmd: list[str], env: dict[str, str] | None = None):
        log = open(self.logs / f"{role}.log", "ab")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, env=env)
        self.procs[role] = proc
        return proc

    def _manage(self, *args: str) -> None:
        subprocess.run([self.python, "manage.py", *args], cwd=REPO, env=self.env, check=True,
                       capture_output=True, timeout=300)

    def roots(self) -> dict[str, int]:
        """role -> the pid whose process tree is that role (for memory sampling)."""
        roots = {role: proc.pid for role, proc in self.procs.items()}
        if self.postgres is not None and self.postgres.proc is not None:
            roots["postgres"] = self.postgres.proc.pid
        return roots

    # --- the two halves ---------------------------------------------------------------
    def start_backends(self, identities: tuple[DemoUser, ...]) -> None:
        (self.root / "pg").mkdir(mode=0o755, exist_ok=True)
        self.postgres = PostgresServer(self.root / "pg" / "data", free_port())
        self.postgres.start(self.logs / "postgres.log", durable=True)  # fsync on, as deployed
        redis_port = free_port()
        self.procs["redis"] = start_redis(redis_port, self.root / "redis",
                                          self.logs / "redis.log")
        # one request at a time, and its token cache (on by default): the first load runs
        # failed without them (logins "database is locked"; a validation queue past the
        # portal's timeout)
        keystone = KeystoneInstall(venv=REPO / ".demo" / "keystone-venv",
                                   state_dir=self.root / "keystone", port=free_port(),
                                   threads=1)
        keystone.ensure()
        self.procs["keystone"] = keystone.start(self.logs / "keystone.log")
        self.keystone_url = keystone.url
        self.log(f"backends up; seeding {len(identities)} Keystone users")
        seed_identities(keystone.url, extra_users=identities)
        kubeconfig = self.root / "kubeconfig"
        kubesim = self._popen("kubesim", [
            self.python, "-m", "kubesim", "--host", "127.0.0.1", "--port", "0",
            "--kubeconfig", str(kubeconfig), "--inventory", str(self.inventory),
            "--log-level", "WARNING"])
        wait_for(kubeconfig.exists, timeout=WAIT, what="kubesim", proc=kubesim)
        static_root = self.root / "static"
        prometheus_dir = self.root / "prometheus"
        prometheus_dir.mkdir()
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_DEBUG": "0",
            "PORTAL_TLS": "0",
            "PORTAL_SECRET_KEY": secrets.token_urlsafe(64),
            "PORTAL_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PORTAL_STATIC_ROOT": str(static_root),
            "PORTAL_LOG_LEVEL": "INFO",  # as deployed (deploy/base/settings.env)
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "KEYSTONE_URL": keystone.url,
            "KEYSTONE_SERVICE_PASSWORD": SERVICE_PASSWORD,
            "KUBECONFIG": str(kubeconfig),
            "PROMETHEUS_MULTIPROC_DIR": str(prometheus_dir),
            "CELERY_BEAT_SCHEDULE_FILENAME": str(self.root / "celerybeat-schedule"),
        }
        self._manage("migrate", "--noinput", "-v", "0")
        self._manage("seed_demo")  # GPU types, a tenant per Keystone project
        self._manage("collectstatic", "--noinput", "-v", "0")

    def start_portal(self) -> None:
        bindir = Path(self.python).parent
        port = free_port()
        self.portal_url = f"http://127.0.0.1:{port}"
        # the image's own gunicorn settings (gthread workers, timeouts, access log)
        web = self._popen("gunicorn", [
            str(bindir / "gunicorn"), "portal.wsgi", "--config", str(GUNICORN_CONF),
            # its own control socket: the default (~/.gunicorn/) is shared by every gunicorn
            "--control-socket", str(self.root / "gunicorn.ctl")],
            env={**self.env, "PORTAL_WEB_BIND": f"127.0.0.1:{port}",
                 "WEB_CONCURRENCY": str(self.web_workers)})
        celery = [self.python, "-m", "celery", "-A", "portal"]
        for n in range(1, self.celery_workers + 1):
            self._popen(f"celery-worker-{n}", [
                *celery, "worker", "--queues", "celery", "--concurrency", str(self.concurrency),
                "--hostname", f"load-worker-{n}@%h", "--loglevel", "INFO"], env=self.env)
        # a workload's objects created and deleted (portal/celery.py's `launches` route)
        self._popen("launch-worker", [
            *celery, "worker", "--queues", "launches", "--pool", "threads", "--concurrency", "16",
            "--hostname", "load-launches@%h", "--loglevel", "INFO"], env=self.env)
        self._popen("tracker", [self.python, "manage.py", "track_workloads"], env=self.env)
        self._popen("beat", [*celery, "beat", "--loglevel", "INFO",
                             "--schedule", str(self.root / "celerybeat-schedule")], env=self.env)
        wait_for(lambda: http_ok(f"{self.portal_url}/healthz"), timeout=WAIT, what="gunicorn",
                 proc=web)

    def close(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            stop(proc, timeout=15)
        if self.postgres is not None:
            self.postgres.destroy()
