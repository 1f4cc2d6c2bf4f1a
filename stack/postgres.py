"""Debian's PostgreSQL server in a private data directory on a loopback port (tests, load runs).

PostgreSQL refuses to run as root, so as root its programs run as the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from .procs import StackError, apt_install, is_root, port_open, wait_for


def postgres_bindir(install: bool = True) -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    if not candidates and install:
        apt_install("postgresql")
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    if not candidates:
        raise StackError("PostgreSQL server not found: `apt-get install postgresql`")
    return Path(candidates[0]).parent


def _as_postgres(cmd: list[str]) -> list[str]:
    if not is_root():
        return cmd
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise StackError("running as root needs the `postgres` system user "
                         "(Debian's postgresql package creates it)") from exc
    return ["runuser", "-u", "postgres", "--", *cmd]


class PostgresServer:
    def __init__(self, data_dir: Path, port: int, user: str = "portal") -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.user = user
        self.bindir = postgres_bindir()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.user}"

    def _chown(self, path: Path) -> None:
        if is_root():
            pw = pwd.getpwnam("postgres")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def init(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.data_dir)
        result = subprocess.run(
            _as_postgres([str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                          "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        if result.returncode != 0:
            raise StackError(f"initdb failed:\n{result.stdout[-2000:]}")

    def start(self, log_file: Path, *, durable: bool = False) -> None:
        self.init()
        options = ["-c", "listen_addresses=127.0.0.1", "-p", str(self.port),
                   "-c", f"unix_socket_directories={self.data_dir}", "-c", "max_connections=300"]
        if not durable:  # tests: speed over crash safety
            options += ["-c", "fsync=off", "-c", "synchronous_commit=off",
                        "-c", "full_page_writes=off"]
        log = open(log_file, "ab")  # noqa: SIM115 - stays open for the server's lifetime
        self.proc = subprocess.Popen(
            _as_postgres([str(self.bindir / "postgres"), "-D", str(self.data_dir), *options]),
            stdout=log, stderr=subprocess.STDOUT,
        )
        wait_for(lambda: port_open(self.port), timeout=30, what="postgres", proc=self.proc)
        wait_for(self._accepts, timeout=30, what="postgres accepting connections", proc=self.proc)
        subprocess.run(
            _as_postgres([str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                          "-U", self.user, self.user]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fails harmlessly when it exists

    def _accepts(self) -> bool:
        return subprocess.run(
            [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ).returncode == 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: smart shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def stop_fast(self, timeout: float = 30) -> None:
        """Fast shutdown, as `pg_ctl restart -m fast` does: open sessions are ended, not waited
        for (SIGTERM's smart shutdown waits for every client to leave)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            return
        subprocess.run(
            _as_postgres([str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data_dir),
                          "-m", "fast", "-t", str(int(timeout))]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.stop()  # reaps the process (or kills one that did not go)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
