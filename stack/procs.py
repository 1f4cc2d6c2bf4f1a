"""Small process helpers shared by the demo and the test fixtures."""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent


class StackError(RuntimeError):
    """A part of the stack could not be installed or started; the message says how to fix it."""


# The ports of the servers the stack starts come from below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default) and the NodePort range above 30000: a
# port the kernel hands out as free is the local end it also hands to outgoing connections, and
# with many clients on the machine one took it between the pick and the server's bind (the
# kube-apiserver's "bind: address already in use"). Below the range, only another pick of the
# same port can: one process never picks a port twice, and a port a live process picked is not
# picked by another (a marker file per port under PICKS, holding the picker's pid, written
# under one lock). Two test processes did: one picked its PostgreSQL's port when it started and
# the server binds it at its first test of the database, a minute later; another process had
# picked it meanwhile and bound it first.
PORTS = range(20000, 30000)
PICKS = Path(tempfile.gettempdir()) / f"gpu-portal-ports-{os.getuid()}"
_picked: set[int] = set()
# two control planes may start at once, each in a thread, picking ports as they go
_picking = threading.Lock()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _mark(port: int) -> bool:
    """Mark `port` as this process's pick, unless a live process other than this one marked it
    (the caller holds the pick lock)."""
    marker = PICKS / str(port)
    try:
        owner = int(marker.read_text() or 0)
    except (FileNotFoundError, ValueError):
        owner = 0
    if owner and owner != os.getpid() and _alive(owner):
        return False
    marker.write_text(str(os.getpid()))
    return True


def free_port() -> int:
    """A loopback port that is free now, for a server about to bind it, and picked by no other
    live process."""
    PICKS.mkdir(exist_ok=True)
    with _picking, open(PICKS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        ports = list(set(PORTS) - _picked)
        random.shuffle(ports)
        for port in ports:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            if not _mark(port):
                continue
            _picked.add(port)
            return port
    raise StackError(f"no free port in {PORTS.start}-{PORTS.stop - 1} on 127.0.0.1")


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


def spawn(cmd: list[str], log_path: Path, *, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own (a terminal's Ctrl-C reaches the stack's process,
    which stops its children in order, not them at once), its output appended to `log_path`."""
    with open(log_path, "ab") as log:  # the child holds its own descriptor of the file
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True)


def spawn_ready(cmd: list[str], log_path: Path, *, ready: Callable[[], object], what: str,
                env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.Popen[bytes]:
    """`spawn`, then wait until `ready()`; a server that exits or is not ready in time is
    stopped, and the error carries the end of its log (what it said about why)."""
    proc = spawn(cmd, log_path, env=env)
    try:
        wait_for(ready, timeout=timeout, what=what, proc=proc, interval=0.1)
    except StackError as exc:
        stop(proc)
        raise StackError(f"{exc}\n{log_path.read_text(errors='replace')[-2000:]}") from None
    return proc


def serve_until_signalled(name: str, start: Callable[[], T], banner: Callable[[T], str],
                          stop_server: Callable[[T], None]) -> int:
    """The `python -m stack.<name>` way of running one server by hand: start it, print how to
    reach it, serve until SIGINT or SIGTERM, stop it. Exit status 1 when it cannot start."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        server = start()
    except StackError as exc:
        print(f"stack.{name}: {exc}", file=sys.stderr)
        return 1
    print(banner(server), flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        stop_server(server)
    return 0


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
