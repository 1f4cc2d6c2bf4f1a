"""`python -m kubesim`: run the simulator's HTTP server and write a kubeconfig for it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import yaml
from aiohttp import web

from kubesim import persist
from kubesim.config import SimConfig
from kubesim.resources import Obj
from kubesim.server import create_app
from kubesim.store import Store

log = logging.getLogger("kubesim")


def parse_lb_pool(text: str) -> tuple[str, list[str]]:
    name, sep, addresses = text.partition("=")
    if not sep or not name or not addresses:
        raise argparse.ArgumentTypeError(f"expected NAME=ADDR,ADDR-RANGE,CIDR, got {text!r}")
    return name, [a.strip() for a in addresses.split(",") if a.strip()]


def parse_args(argv: list[str] | None = None) -> tuple[SimConfig, bool]:
    defaults = SimConfig()
    p = argparse.ArgumentParser(prog="kubesim", description=__doc__)
    p.add_argument("--host", default=defaults.host)
    p.add_argument("--port", type=int, default=defaults.port, help="0 = pick a free port")
    p.add_argument("--kubeconfig", help="write a kubeconfig for this server to this path")
    p.add_argument("--token", help="require 'Authorization: Bearer TOKEN' on every request")
    p.add_argument("--inventory", help="YAML node inventory (none = no nodes)")
    p.add_argument("--state-file", help="load state from here at start, save it here")
    p.add_argument("--seed", type=int, default=defaults.seed)
    for field in (
        "schedule_delay",
        "container_create_delay",
        "ready_delay",
        "default_run_seconds",
        "metrics_interval",
        "save_interval",
        "bookmark_interval",
    ):
        p.add_argument("--" + field.replace("_", "-"), type=float, default=getattr(defaults, field))
    p.add_argument("--bad-image-pattern", default=defaults.bad_image_pattern)
    p.add_argument("--history-size", type=int, default=defaults.history_size)
    p.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    p.add_argument(
        "--lb-pool",
        action="append",
        type=parse_lb_pool,
        default=[],
        metavar="NAME=ADDR,ADDR-RANGE,CIDR",
        help="a LoadBalancer address pool",
    )
    p.add_argument(
        "--no-cluster",
        action="store_true",
        help="serve the API only: no nodes, scheduler, kubelet or controllers",
    )
    p.add_argument("--log-level", default=os.environ.get("KUBESIM_LOG_LEVEL", "INFO"))
    args = p.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return SimConfig(
        host=args.host,
        port=args.port,
        kubeconfig=args.kubeconfig,
        token=args.token,
        inventory=args.inventory,
        state_file=args.state_file,
        seed=args.seed,
        schedule_delay=args.schedule_delay,
        container_create_delay=args.container_create_delay,
        ready_delay=args.ready_delay,
        bad_image_pattern=args.bad_image_pattern,
        default_run_seconds=args.default_run_seconds,
        lb_pools=dict(args.lb_pool) or None,
        history_size=args.history_size,
        max_body_bytes=args.max_body_bytes,
        metrics_interval=args.metrics_interval,
        save_interval=args.save_interval,
        bookmark_interval=args.bookmark_interval,
    ), not args.no_cluster


def kubeconfig_document(server: str, token: str | None) -> Obj:
    user: dict[str, str] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": {"server": server}}],
        "users": [{"name": "kubesim", "user": user}],
        "contexts": [
            {
                "name": "kubesim",
                "context": {"cluster": "kubesim", "user": "kubesim", "namespace": "default"},
            }
        ],
        "current-context": "kubesim",
        "preferences": {},
    }


def write_kubeconfig(path: str, server: str, token: str | None) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig_document(server, token), sort_keys=False))
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)


async def serve(config: SimConfig, with_cluster: bool = True) -> None:
    store = Store(config)
    if config.state_file:
        persist.load(store, config.state_file)
    app = create_app(config, store, with_cluster=with_cluster)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=2.0, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
    await site.start()
    sockets = site._server.sockets if site._server else []  # type: ignore[attr-defined]  # noqa: SLF001 - the bound port
    port = sockets[0].getsockname()[1] if sockets else config.port
    config.port = port
    url = f"http://{config.host}:{port}"
    if config.kubeconfig:
        write_kubeconfig(config.kubeconfig, url, config.token)
    print(f"kubesim listening on {url}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    saver = None
    if config.state_file:
        saver = asyncio.create_task(
            persist.save_periodically(store, config.state_file, config.save_interval)
        )
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        if saver is not None:
            saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await saver
        await runner.cleanup()
        if config.state_file:
            persist.save(store, config.state_file)
            log.info("state saved to %s", config.state_file)


def main(argv: list[str] | None = None) -> int:
    config, with_cluster = parse_args(argv)
    try:
        asyncio.run(serve(config, with_cluster))
    except OSError as e:
        print(f"kubesim: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
