"""Debian's redis-server on loopback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .procs import StackError, apt_install, port_open, wait_for


def redis_server_binary(install: bool = True) -> str:
    path = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if path is None and install:
        apt_install("redis-server")
        path = shutil.which("redis-server") or "/usr/bin/redis-server"
    if path is None or not Path(path).exists():
        raise StackError("redis-server not found: `apt-get install redis-server`")
    return path


def redis_command(port: int, data_dir: Path) -> list[str]:
    """An ephemeral Redis: loopback only, no persistence (a broker and cache, not a store)."""
    return [
        redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no", "--dir", str(data_dir), "--daemonize", "no",
    ]


def start_redis(port: int, data_dir: Path, log_file: Path) -> subprocess.Popen[bytes]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(redis_command(port, data_dir), stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: port_open(port), timeout=15, what="redis-server", proc=proc)
    return proc
