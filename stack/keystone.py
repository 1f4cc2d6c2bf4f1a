"""A real OpenStack Keystone (pip `keystone`) in its own virtualenv, SQLite, fernet tokens.

    install = KeystoneInstall(venv=…, state_dir=…, port=5000)
    install.ensure()          # venv, config, database, keys, bootstrap: each step once
    proc = install.start(log) # served by stack/runners/keystone_wsgi.py
    seed_identities(install.url, ADMIN_PASSWORD)   # the demo users and projects
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import getpass
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from .procs import REPO, StackError, http_ok, wait_for

ADMIN_PASSWORD = "admin-demo-pass"
SERVICE_USER = "gpu-portal"
SERVICE_PASSWORD = "gpu-portal-service-pass"
SERVICE_PROJECT = "service"
KEYSTONE_PACKAGES = ["keystone", "waitress"]
MANAGE_TIMEOUT_SECONDS = 900  # one keystone-manage step (db_sync, bootstrap)
KEY_REPOSITORIES = ("fernet-keys", "credential-keys")
# the address a bootstrapped template's endpoints name until a copy is given its own
TEMPLATE_URL = "http://keystone.invalid/v3"


class KeystoneInstall:
    def __init__(self, *, venv: Path, state_dir: Path, port: int, host: str = "127.0.0.1",
                 token_expiration: int = 3600, threads: int = 8,
                 token_cache: bool = True, lockout_attempts: int = 6,
                 lockout_seconds: int = 300) -> None:
        """`threads`: the runner's request threads. Keystone writes the user's last_active_at
        at every password login and SQLite takes one writer at a time, so logins that come
        together may fail with "database is locked" unless it serves one request at a time
        (Keystone's work is Python under one GIL: one thread costs it little throughput).
        `token_cache`: Keystone's own cache (dogpile, in process memory), as production
        Keystones run it (memcached there). Without it every validation recomputes the role
        assignments through SQLAlchemy: on this 2-core machine a validation took 0.7-1.2 s and
        a password token 0.35-0.46 s, against 9-16 ms and 24-73 ms with it (one idle Keystone,
        10 requests each). Keystone invalidates it itself when assignments change or a token is
        revoked (one process, so no other copy can go stale). Every user here keeps it on."""
        self.venv = Path(venv)
        self.state_dir = Path(state_dir)
        self.host = host
        self.port = port
        self.token_expiration = token_expiration
        self.threads = threads
        self.token_cache = token_cache
        # Keystone's own lockout: its API has none by default, so a script that goes to
        # Keystone directly would pass the portal's login throttle; 0 turns it off
        self.lockout_attempts = lockout_attempts
        self.lockout_seconds = lockout_seconds

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v3"

    @property
    def config_file(self) -> Path:
        return self.state_dir / "keystone.conf"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "OS_KEYSTONE_CONFIG_FILES": str(self.config_file)}

    # --- installation ----------------------------------------------------------------
    def ensure_venv(self) -> None:
        marker = self.venv / ".keystone-installed"
        if marker.exists():
            return
        print(f"installing Keystone into {self.venv} …", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(self.venv)], check=True)
        log_file = self.venv / "pip-install.log"
        with open(log_file, "w") as log:
            result = subprocess.run(
                [str(self.python), "-m", "pip", "install", "-q", *KEYSTONE_PACKAGES],
                stdout=log, stderr=subprocess.STDOUT,
            )
        if result.returncode != 0:
            raise StackError(f"pip install keystone failed; see {log_file}")
        marker.write_text("ok\n")

    def write_config(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cache = ("enabled = true\n            backend = dogpile.cache.memory" if self.token_cache
                 else "enabled = false")
        # a user who failed this many passwords in a row is refused, the right one included,
        # for this long (Keystone resets the count at a success)
        lockout = (f"lockout_failure_attempts = {self.lockout_attempts}\n"
                   f"            lockout_duration = {self.lockout_seconds}"
                   if self.lockout_attempts else "")
        self.config_file.write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = false
            use_stderr = true

            [database]
            connection = sqlite:///{self.state_dir / 'keystone.db'}

            [token]
            provider = fernet
            expiration = {self.token_expiration}

            [fernet_tokens]
            key_repository = {self.state_dir / 'fernet-keys'}

            [fernet_receipts]
            key_repository = {self.state_dir / 'fernet-keys'}

            [credential]
            key_repository = {self.state_dir / 'credential-keys'}

            [identity]
            # the embedded demo/test Keystone only: cheap bcrypt keeps logins fast on 2 cores
            password_hash_rounds = 4

            [security_compliance]
            {lockout}

            [cache]
            {cache}

            [oslo_policy]
            enforce_new_defaults = true
            enforce_scope = true
            """))

    def _manage(self, *args: str) -> None:
        manage = self.venv / "bin" / "keystone-manage"
        try:  # a bound of its own: seconds on a quiet machine, minutes under a heavy load
            result = subprocess.run([str(manage), "--config-file", str(self.config_file), *args],
                                    env=self._env(), timeout=MANAGE_TIMEOUT_SECONDS,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"keystone-manage {args[0]} did not end within "
                             f"{MANAGE_TIMEOUT_SECONDS} s") from exc
        if result.returncode != 0:
            raise StackError(f"keystone-manage {args[0]} failed:\n{result.stdout[-3000:]}")

    def ensure(self) -> None:
        """Install and bootstrap once; later calls only rewrite the config (cheap). The
        bootstrapped database is made once per Keystone virtualenv and copied: the four
        `keystone-manage` steps each import Keystone, 30-35 s together on two busy cores, and a
        test run starts four Keystones (each test process's, each demo the tests start). Only
        the catalog's endpoints name the address: the copy's are set to this one's. Its keys
        are its own."""
        self.ensure_venv()
        self.write_config()
        marker = self.state_dir / ".bootstrapped"
        if marker.exists():
            return
        template = self._bootstrapped_template()
        shutil.copy2(template / "keystone.db", self.state_dir / "keystone.db")
        self._fresh_keys()
        with contextlib.closing(sqlite3.connect(self.state_dir / "keystone.db")) as db, db:
            db.execute("UPDATE endpoint SET url = ? WHERE url = ?", (self.url, TEMPLATE_URL))
        marker.write_text("ok\n")

    def _fresh_keys(self) -> None:
        """Keys of its own, as `fernet_setup` and `credential_setup` make them (a staged key 0
        and a primary 1, each Fernet's 32 random bytes in URL-safe base64): a token one copy
        issued means nothing to another. The template's database holds nothing encrypted."""
        for keys in KEY_REPOSITORIES:
            folder = self.state_dir / keys
            folder.mkdir(mode=0o700, exist_ok=True)
            for index in ("0", "1"):
                path = folder / index
                path.touch(mode=0o600)
                path.write_bytes(base64.urlsafe_b64encode(os.urandom(32)))

    def _bootstrap(self, url: str) -> None:
        user = getpass.getuser()
        group = user  # the keys belong to whoever runs Keystone here
        for keys in KEY_REPOSITORIES:
            (self.state_dir / keys).mkdir(mode=0o700, exist_ok=True)
        self._manage("db_sync")
        self._manage("fernet_setup", "--keystone-user", user, "--keystone-group", group)
        self._manage("credential_setup", "--keystone-user", user, "--keystone-group", group)
        self._manage("bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                     "--bootstrap-admin-url", url, "--bootstrap-public-url", url,
                     "--bootstrap-internal-url", url, "--bootstrap-region-id", "RegionOne")

    def _bootstrapped_template(self) -> Path:
        """A bootstrapped state whose endpoints name TEMPLATE_URL, made once per virtualenv
        (its install marker's time names it: a venv installed again gets a new one) and kept
        beside the other builds outside the clone. Processes that start together wait for the
        first one's under a lock."""
        from .k8s.build import cache_root

        installed = (self.venv / ".keystone-installed").stat().st_mtime_ns
        key = hashlib.sha256(f"{self.venv.resolve()}|{installed}|{ADMIN_PASSWORD}|"
                             f"{TEMPLATE_URL}".encode()).hexdigest()[:16]
        root = cache_root() / "keystone"
        template = root / key
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (template / ".bootstrapped").exists():
                shutil.rmtree(template, ignore_errors=True)
                maker = KeystoneInstall(venv=self.venv, state_dir=template, port=self.port)
                maker.write_config()
                maker._bootstrap(TEMPLATE_URL)
                (template / ".bootstrapped").write_text("ok\n")
        return template

    # --- running -----------------------------------------------------------------------
    def command(self) -> list[str]:
        return [str(self.python), str(REPO / "stack" / "runners" / "keystone_wsgi.py")]

    def runner_env(self) -> dict[str, str]:
        return {**self._env(), "KEYSTONE_RUNNER_HOST": self.host,
                "KEYSTONE_RUNNER_PORT": str(self.port),
                "KEYSTONE_RUNNER_THREADS": str(self.threads)}

    def start(self, log_file: Path) -> subprocess.Popen[bytes]:
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(self.command(), env=self.runner_env(), stdout=log,
                                    stderr=subprocess.STDOUT)
        self.wait_ready(proc)
        return proc

    def wait_ready(self, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60) -> None:
        wait_for(lambda: http_ok(self.url), timeout=timeout, what="keystone", proc=proc,
                 interval=0.2)
