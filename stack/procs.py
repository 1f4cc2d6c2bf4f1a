"""Small process helpers shared by the demo and the test fixtures."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class StackError(RuntimeError):
    """A part of the stack could not be installed or started; the message says how to fix it."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def wait_for(predicate: Callable[[], object], *, timeout: float, what: str, interval: float = 0.1,
             proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise StackError(f"{what}: the process exited with {proc.returncode}")
        time.sleep(interval)
    raise StackError(f"{what}: not ready after {timeout:.0f} s")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            status: int = resp.status
            return status < 500
    except (urllib.error.URLError, OSError):
        return False


def is_root() -> bool:
    return os.geteuid() == 0


def apt_install(*packages: str) -> None:
    """Install Debian packages, as the project's own install step (root only)."""
    if not is_root():
        raise StackError(
            f"{', '.join(packages)} missing: run `sudo apt-get install -y {' '.join(packages)}` "
            "and try again."
        )
    if shutil.which("apt-get") is None:
        raise StackError(f"{', '.join(packages)} missing and there is no apt-get: install them.")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing {' '.join(packages)} with apt-get …", file=sys.stderr, flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
