"""Plausible, deterministic container logs for simulated pods.

A container's log is a pure function of the pod, the container and its start (and end) time:
the same pod always prints the same lines, and `follow` just reveals lines as their time comes.
Images that the portal launches get their real start-up banners (Jupyter prints its URL with
the token from `JUPYTER_TOKEN` or `--ServerApp.token`, TensorBoard its address, DIGITS its
port); anything else prints a generic start-up and, for batch containers, training progress.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

Line = tuple[float, str]  # (wall-clock seconds, text)

# How often a long-running service container prints something after its start-up banner.
HEARTBEAT = 30.0
# Spacing of the start-up banner's lines: all printed within milliseconds of the start, so
# that a Ready container's log already shows its URL.
BANNER_STEP = 0.001


@dataclass
class LogContext:
    namespace: str
    pod: str
    uid: str
    container: str
    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    gpus: list[str]  # "NVIDIA A100-SXM4-80GB (GPU-…)" for each device held
    started: float
    batch: bool
    run_seconds: float | None  # None: runs until stopped
    exit_code: int = 0


def rfc3339_nano(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    nanos = int(round((ts - math.floor(ts)) * 1e9)) % 1_000_000_000
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def _hex(*parts: object, n: int = 48) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:n]


def _flag(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
            if arg == name and i + 1 < len(args):
                return args[i + 1]
    return None


def _jupyter(ctx: LogContext) -> list[str]:
    argv = ctx.command + ctx.args
    token = (_flag(argv, "--ServerApp.token", "--NotebookApp.token", "--IdentityProvider.token")
             or ctx.env.get("JUPYTER_TOKEN") or _hex("token", ctx.uid))
    base = (_flag(argv, "--ServerApp.base_url", "--NotebookApp.base_url")
            or ctx.env.get("NB_PREFIX") or "/").rstrip("/") + "/"
    port = _flag(argv, "--ServerApp.port", "--NotebookApp.port", "--port") or "8888"
    day = datetime.fromtimestamp(ctx.started, UTC).strftime("%Y-%m-%d %H:%M:%S")
    url = f"{base}lab?token={token}"

    def info(i: int, text: str, level: str = "I") -> str:
        return f"[{level} {day}.{(i * 37) % 1000:03d} ServerApp] {text}"

    return [
        "Entered start.sh with args: start-notebook.py",
        "Executing the command: start-notebook.py",
        info(1, "jupyter_lsp | extension was successfully linked."),
        info(2, "jupyter_server_terminals | extension was successfully linked."),
        info(3, "jupyterlab | extension was successfully linked."),
        info(4, "Writing Jupyter server cookie secret to "
                "/home/jovyan/.local/share/jupyter/runtime/jupyter_cookie_secret"),
        info(5, "notebook_shim | extension was successfully linked."),
        info(6, "jupyterlab | extension was successfully loaded."),
        info(7, "Serving notebooks from local directory: /home/jovyan"),
        info(8, "Jupyter Server 2.14.2 is running at:"),
        info(9, f"http://{ctx.pod}:{port}{url}"),
        info(10, f"    http://127.0.0.1:{port}{url}"),
        info(11, "Use Control-C to stop this server and shut down all kernels "
                 "(twice to skip confirmation)."),
        info(12, "", "C"),
        "    ",
        "    To access the server, open this file in a browser:",
        "        file:///home/jovyan/.local/share/jupyter/runtime/jpserver-7-open.html",
        "    Or copy and paste one of these URLs:",
        f"        http://{ctx.pod}:{port}{url}",
        f"        http://127.0.0.1:{port}{url}",
    ]


def _tensorboard(ctx: LogContext) -> list[str]:
    argv = ctx.command + ctx.args
    port = _flag(argv, "--port") or "6006"
    logdir = _flag(argv, "--logdir") or "/logs"
    return [
        "NOTE: Using experimental fast data loading logic. To disable, pass",
        '    "--load_fast=false" and report issues on GitHub. More details:',
        "    https://github.com/tensorflow/tensorboard/issues/4784",
        "",
        "Serving TensorBoard on localhost; to expose to the network, use a proxy or pass --bind_all",
        f"TensorBoard 2.16.2 at http://0.0.0.0:{port}/ (Press CTRL+C to quit)",
        f"Reading event files from {logdir}",
    ]


def _digits(ctx: LogContext) -> list[str]:
    return [
        "  ___ ___ ___ ___ _____ ___",
        " |   \\_ _/ __|_ _|_   _/ __|",
        " | |) | | (_ || |  | | \\__ \\",
        " |___/___\\___|___| |_| |___/ 6.1.1",
        "",
        "cudaRuntimeGetVersion() succeeded: 11020",
        *(f"GPU #{i}: {g}" for i, g in enumerate(ctx.gpus)),
        "2024-01-01 00:00:00 [INFO ] Loaded 0 jobs.",
        "DIGITS server listening on http://0.0.0.0:5000/",
    ]


def _nginx(ctx: LogContext) -> list[str]:
    return [
        "/docker-entrypoint.sh: /docker-entrypoint.d/ is not empty, will attempt to perform configuration",
        "/docker-entrypoint.sh: Looking for shell scripts in /docker-entrypoint.d/",
        "/docker-entrypoint.sh: Launching /docker-entrypoint.d/10-listen-on-ipv6-by-default.sh",
        "/docker-entrypoint.sh: Configuration complete; ready for start up",
        "nginx: [notice] using the \"epoll\" event method",
        "nginx: [notice] start worker processes",
    ]


def _generic(ctx: LogContext) -> list[str]:
    lines = [f"Starting {ctx.image} (container {ctx.container} in pod {ctx.namespace}/{ctx.pod})"]
    argv = ctx.command + ctx.args
    if argv:
        lines.append("Command: " + " ".join(argv))
    if ctx.gpus:
        lines.append(f"CUDA devices visible: {len(ctx.gpus)}")
        lines.extend(f"  cuda:{i} {g}" for i, g in enumerate(ctx.gpus))
    else:
        lines.append("No CUDA devices visible; running on CPU")
    return lines


def _banner(ctx: LogContext) -> list[str]:
    image = ctx.image.lower()
    argv = " ".join(ctx.command + ctx.args).lower()
    builders: list[tuple[Callable[[], bool], Callable[[LogContext], list[str]]]] = [
        (lambda: "jupyter" in image or "notebook" in image or "jupyter" in argv, _jupyter),
        (lambda: "tensorboard" in image or "tensorboard" in argv, _tensorboard),
        (lambda: "digits" in image, _digits),
        (lambda: image.split("/")[-1].startswith("nginx"), _nginx),
    ]
    for matches, build in builders:
        if matches():
            return build(ctx)
    return _generic(ctx)


def lines_until(ctx: LogContext, until: float, finished: float | None = None) -> list[Line]:
    """Every line the container has printed by wall time `until` (its end, if `finished`)."""
    end = min(until, finished) if finished is not None else until
    out: list[Line] = []
    t = ctx.started
    for i, text in enumerate(_banner(ctx)):
        t = ctx.started + BANNER_STEP * (i + 1)
        if t > end and finished is None:
            return out
        out.append((min(t, finished) if finished is not None else t, text))
    if ctx.batch:
        duration = ctx.run_seconds if ctx.run_seconds is not None else 0.0
        steps = max(1, min(100, int(duration)))
        interval = duration / (steps + 1) if duration else 0.0
        for step in range(1, steps + 1):
            t = ctx.started + interval * step
            if t > end:
                break
            loss = 2.3 * math.exp(-3.0 * step / steps) + 0.05 * int(_hex(ctx.uid, step, n=4), 16) / 65535
            out.append((t, f"step {step}/{steps} loss={loss:.4f}"))
    else:
        k = 1
        while ctx.started + HEARTBEAT * k <= end:
            out.append((ctx.started + HEARTBEAT * k,
                        f"{rfc3339_nano(ctx.started + HEARTBEAT * k)[:19]}Z INFO still serving "
                        f"(uptime {int(HEARTBEAT * k)}s)"))
            k += 1
    if finished is not None and finished <= until:
        if ctx.exit_code == 0:
            out.append((finished, "Done."))
        else:
            out.append((finished, f"Error: process exited with status {ctx.exit_code}"))
    return out


def next_line_at(ctx: LogContext, after: float) -> float | None:
    """When the next line after wall time `after` appears (None: no more until the end)."""
    banner = len(_banner(ctx))
    last_banner = ctx.started + BANNER_STEP * banner
    if after < last_banner:
        return ctx.started + BANNER_STEP * (int((after - ctx.started) / BANNER_STEP) + 1)
    if ctx.batch:
        duration = ctx.run_seconds or 0.0
        steps = max(1, min(100, int(duration)))
        interval = duration / (steps + 1) if duration else 0.0
        if interval <= 0:
            return None
        step = int((after - ctx.started) / interval) + 1
        return ctx.started + interval * step if step <= steps else None
    return ctx.started + HEARTBEAT * (int((after - ctx.started) / HEARTBEAT) + 1)
