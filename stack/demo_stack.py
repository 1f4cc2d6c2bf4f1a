"""The demo's own configuration (stack/demo.py) started as subprocesses on a temporary folder and
free ports, for a test or a benchmark: the same environment, the same Keystone, the same
process list as `make demo`, only not on 8000/5000/8001 and not under .demo/.

    stack = DemoStack(tmp_path, web="gunicorn")   # cluster="kube": `make demo CLUSTER=kube`'s
    stack.start()            # Keystone, Redis, kubesim, migrate + collectstatic, web, worker, tracker, beat, seed
    stack.url, stack.keystone.url, stack.kubeconfig, stack.log("tracker")
    stack.close()            # every process, whatever happened

    DemoStack(tmp_path, schema=folder)   # several demos, one `prepare`: the first one's in
                                         # `folder`, copied by the others

Each process runs in its own session and writes <root>/logs/<name>.log.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from .demo import (
    WEB_SERVER,
    DemoLayout,
    collect_static,
    demo_processes,
    keystone_install,
    migrate,
    portal_env,
    prepare,
    seed,
    start_real_cluster,
)
from .keystone import KeystoneInstall
from .procs import REPO, free_port, http_ok, port_open, stop, wait_for

if TYPE_CHECKING:
    from .k8s.cluster import ControlPlane

# started first, then the schema, then the portal's own processes
BACKENDS = ("keystone", "redis", "kubesim")


def shared_schema(folder: Path, *, static: bool = True) -> Path:
    """What `prepare` makes, made once in `folder` for whatever copies it (DemoStack(schema=
    folder), a test that needs a migrated SQLite database): the migrated database
    (portal.sqlite3) and, unless `static` is false, the collected static files (static/).
    Migrating SQLite from nothing is the longest step of a demo's start (75 migrations, 50 s
    on two busy cores), and neither result depends on the demo's ports or folder. Processes
    that start together wait for the first one's under a lock."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        layout = DemoLayout(root=folder)
        if not (folder / ".migrated").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            migrate(portal_env(layout))
            # the whole database in its one file, for a plain copy (the WAL folded in)
            with contextlib.closing(sqlite3.connect(layout.database)) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (folder / ".migrated").write_text("ok\n")
        if static and not (folder / ".collected").exists():
            collect_static(portal_env(layout))
            (folder / ".collected").write_text("ok\n")
    return folder


class DemoStack:
    def __init__(self, root: Path, *, web: str = WEB_SERVER, cluster: str = "kubesim",
                 schema: Path | None = None) -> None:
        """`schema`: a folder for `shared_schema`, whose database and static files are
        copied in place of running `prepare` again."""
        root.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.layout = DemoLayout(root=root, portal_port=free_port(), keystone_port=free_port(),
                                 kubesim_port=free_port(), redis_port=free_port(), web=web,
                                 cluster=cluster)
        # cluster="kube": the real control planes (stack/k8s/), the portal's own first
        self.control_planes: list[ControlPlane] = []
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        self.keystone: KeystoneInstall = keystone_install(self.layout)
        self.env: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        return self.layout.portal_url

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    def log(self, name: str) -> str:
        path = self.layout.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None) -> None:
        with open(self.layout.logs / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> DemoStack:
        self.keystone.ensure()
        self.env = portal_env(self.layout)
        try:
            if self.layout.cluster == "kube":
                self.control_planes = start_real_cluster(self.layout, self.keystone, self.env)
            processes = demo_processes(self.layout, self.keystone, self.env)
            for process in processes:
                if process.name in BACKENDS:
                    self._start(process.name, process.argv, process.env)
            wait_for(lambda: port_open(self.layout.redis_port), timeout=30, what="redis",
                     proc=self.procs["redis"])
            if "kubesim" in self.procs:
                wait_for(self.kubeconfig.exists, timeout=60, what="kubesim",
                         proc=self.procs["kubesim"])
            if self.schema is None:
                prepare(self.env)
            else:
                made = shared_schema(self.schema)
                shutil.copy2(made / "portal.sqlite3", self.layout.database)
                shutil.copytree(made / "static", self.env["PORTAL_STATIC_ROOT"])
            for process in processes:
                if process.name not in BACKENDS:
                    self._start(process.name, process.argv, process.env)
            seed(self.layout, self.env, self.keystone)
            wait_for(lambda: http_ok(f"{self.url}/healthz"), timeout=60, what="portal",
                     proc=self.procs["web"])
            # as in a demo that has been up a while: the tracker's watches are under way
            wait_for(lambda: "tracker synced" in self.log("tracker"), timeout=90,
                     what="the tracker's first lists", proc=self.procs["tracker"])
        except BaseException:
            self.close()
            raise
        return self

    def running(self) -> dict[str, bool]:
        return {name: proc.poll() is None for name, proc in self.procs.items()}

    def close(self) -> None:
        # the portal's processes together, then the servers they use together: each takes a
        # second or three to stop (Celery's warm shutdown, gunicorn's workers), one after
        # another 17 s in all
        portal = [proc for name, proc in self.procs.items() if name not in BACKENDS]
        backends = [proc for name, proc in self.procs.items() if name in BACKENDS]
        for procs in (portal, backends):
            for proc in procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                stop(proc, timeout=15)
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
        for cp in reversed(self.control_planes):
            cp.stop()
        self.control_planes = []
