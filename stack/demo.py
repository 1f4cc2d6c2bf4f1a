"""`make demo`: the portal with its embedded stack, supervised by honcho, on loopback.

Everything lives under .demo/ at the repo root (logs in .demo/logs/). The first run installs
Keystone into its own virtualenv and bootstraps it (and installs Debian's redis-server when
missing and running as root); later runs reuse all of it and are ready in seconds.

    portal   http://127.0.0.1:8000/
    keystone http://127.0.0.1:5000/v3
    kubesim  http://127.0.0.1:8001   (kubeconfig: .demo/kubeconfig)
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from honcho.manager import Manager
from honcho.printer import Printer

from .identities import USERS, seed_identities
from .keystone import ADMIN_PASSWORD, SERVICE_PASSWORD, KeystoneInstall
from .procs import REPO, StackError, http_ok, port_open, wait_for
from .redis import redis_command

DEMO = REPO / ".demo"
LOGS = DEMO / "logs"
PORTAL_PORT = 8000
KEYSTONE_PORT = 5000
KUBESIM_PORT = 8001
REDIS_PORT = int(os.environ.get("DEMO_REDIS_PORT", "6390"))  # off 6379: leave a site Redis be
INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"


class TeePrinter(Printer):
    """honcho's printer, plus a log file per process under .demo/logs/."""

    def __init__(self, output, log_dir: Path) -> None:
        super().__init__(output)
        self.log_dir = log_dir
        self._files: dict[str, object] = {}

    def write(self, message) -> None:
        super().write(message)
        name = message.name or "system"
        if name not in self._files:
            self._files[name] = open(self.log_dir / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115
        data = message.data.decode("utf-8", "replace") if isinstance(message.data, bytes) else message.data
        handle = self._files[name]
        handle.write(data if data.endswith("\n") else data + "\n")
        handle.flush()


def _secret_key() -> str:
    path = DEMO / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64))
        path.chmod(0o600)
    return path.read_text().strip()


def portal_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "PORTAL_DEBUG": "1",
        "PORTAL_TLS": "0",
        "PORTAL_SECRET_KEY": _secret_key(),
        "DATABASE_URL": f"sqlite:///{DEMO / 'portal.sqlite3'}",
        "REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0",
        "KEYSTONE_URL": f"http://127.0.0.1:{KEYSTONE_PORT}/v3",
        "KEYSTONE_SERVICE_PASSWORD": SERVICE_PASSWORD,
        "KUBECONFIG": str(DEMO / "kubeconfig"),
        "CELERY_BEAT_SCHEDULE_FILENAME": str(DEMO / "celerybeat-schedule"),
    }


def _check_ports() -> None:
    busy = [p for p in (PORTAL_PORT, KEYSTONE_PORT, KUBESIM_PORT, REDIS_PORT) if port_open(p)]
    if busy:
        raise StackError(f"port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1: "
                         "is another `make demo` running? Stop it first.")


def _announce(env: dict[str, str], keystone: KeystoneInstall, started: float) -> None:
    """Wait until every part answers, seed Keystone's demo identities, print the welcome."""
    try:
        keystone.wait_ready(timeout=120)
        seed_identities(keystone.url)
        subprocess.run([sys.executable, "manage.py", "seed_demo"], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        wait_for(lambda: http_ok(f"http://127.0.0.1:{PORTAL_PORT}/healthz"), timeout=120,
                 what="portal")
        if INVENTORY.exists():
            wait_for(lambda: port_open(KUBESIM_PORT), timeout=60, what="kubesim")
    except (StackError, subprocess.CalledProcessError) as exc:
        print(f"\n!! demo not ready: {exc} (see .demo/logs/)\n", flush=True)
        return
    accounts = "\n".join(
        f"    {u.name:<11} {u.password:<22} {u.description}" for u in USERS if u.name != "gpu-portal"
    )
    print(f"""
==============================================================================
 GPU portal demo ready in {time.monotonic() - started:.1f} s

    portal    http://127.0.0.1:{PORTAL_PORT}/
    keystone  {keystone.url}
    kubesim   http://127.0.0.1:{KUBESIM_PORT}   (kubectl --kubeconfig .demo/kubeconfig get nodes)

 Accounts (domain Default):
    admin       {ADMIN_PASSWORD:<22} portal admin (admin on project admin)
{accounts}

 Logs: .demo/logs/   Stop: Ctrl-C
==============================================================================
""", flush=True)


def main() -> int:
    started = time.monotonic()
    DEMO.mkdir(exist_ok=True)
    LOGS.mkdir(exist_ok=True)
    try:
        _check_ports()
        keystone = KeystoneInstall(venv=DEMO / "keystone-venv", state_dir=DEMO / "keystone",
                                   port=KEYSTONE_PORT)
        keystone.ensure()
        redis = redis_command(REDIS_PORT, DEMO / "redis")
        (DEMO / "redis").mkdir(exist_ok=True)
    except StackError as exc:
        print(f"make demo: {exc}", file=sys.stderr)
        return 1
    env = portal_env()
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                   check=True)
    manager = Manager(TeePrinter(sys.stdout, LOGS))
    manager.add_process("keystone", shlex.join(keystone.command()), env=keystone.runner_env(),
                        cwd=str(REPO))
    manager.add_process("redis", shlex.join(redis), cwd=str(REPO))
    if INVENTORY.exists():
        manager.add_process("kubesim", shlex.join([
            python, "-m", "kubesim", "--host", "127.0.0.1", "--port", str(KUBESIM_PORT),
            "--inventory", str(INVENTORY), "--kubeconfig", str(DEMO / "kubeconfig"),
            "--state-file", str(DEMO / "kubesim-state.json"),
        ]), env=env, cwd=str(REPO))
    manager.add_process("web", shlex.join([
        python, "manage.py", "runserver", f"127.0.0.1:{PORTAL_PORT}", "--noreload",
    ]), env=env, cwd=str(REPO))
    manager.add_process("worker", shlex.join([
        python, "-m", "celery", "-A", "portal", "worker", "--loglevel", "INFO",
        "--concurrency", "2", "--queues", "celery", "--hostname", "demo-worker@%h",
    ]), env=env, cwd=str(REPO))
    # the lifecycle tracker: one process, so its list + watch view lives from cycle to cycle
    manager.add_process("tracker", shlex.join([
        python, "-m", "celery", "-A", "portal", "worker", "--loglevel", "INFO",
        "--pool", "solo", "--queues", "tracker", "--hostname", "demo-tracker@%h",
    ]), env=env, cwd=str(REPO))
    manager.add_process("beat", shlex.join([
        python, "-m", "celery", "-A", "portal", "beat", "--loglevel", "INFO",
        "--schedule", str(DEMO / "celerybeat-schedule"),
    ]), env=env, cwd=str(REPO))
    threading.Thread(target=_announce, args=(env, keystone, started), daemon=True).start()
    manager.loop()
    return manager.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
