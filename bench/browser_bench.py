#!/usr/bin/env python
"""The launch page in a real browser: page weight and time to first render.

    .venv/bin/python bench/browser_bench.py [--loads 5] [--json out.json]

It starts the portal as production runs it, on loopback under a temporary folder (the stack of
bench/launch_bench.py: PostgreSQL, Redis, Keystone, kubesim with the demo inventory, gunicorn
with PORTAL_DEBUG=0, one Celery worker), after `collectstatic` so that WhiteNoise serves the
hashed, compressed static files. Then Debian's Chromium (headless, through Playwright) logs in
as researcher, picks vision-lab and opens /workloads/new/ `--loads` times, each in a fresh
browser context (empty cache, the session cookie copied in): a first visit. Per load, from the
browser's own Performance API:

- bytes transferred: the navigation's transferSize plus every resource's (headers included,
  compressed as sent);
- first-contentful-paint (the 'paint' entry), DOMContentLoaded and load, from the start of
  the navigation;
- the number of requests.

It reports the median of the loads, and one reload in the same context (a repeat visit:
hashed static files come from the browser's cache).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from launch_bench import Stack  # noqa: E402 - the same stack, started the same way

from stack.browser import chromium_binary  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PAGE = "/workloads/new/"

MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  const fcp = performance.getEntriesByType('paint').find(p => p.name === 'first-contentful-paint');
  return {
    bytes: nav.transferSize + resources.reduce((sum, r) => sum + r.transferSize, 0),
    html_bytes: nav.transferSize,
    decoded_bytes: nav.decodedBodySize + resources.reduce((sum, r) => sum + r.decodedBodySize, 0),
    requests: 1 + resources.length,
    resources: resources.map(r => [r.name.replace(location.origin, ''), r.transferSize, r.decodedBodySize]),
    ttfb_ms: nav.responseStart - nav.startTime,
    fcp_ms: fcp ? fcp.startTime : null,
    dcl_ms: nav.domContentLoadedEventEnd - nav.startTime,
    load_ms: nav.loadEventEnd - nav.startTime,
  };
}"""


def collect_static(root: Path) -> None:
    os.environ["PORTAL_STATIC_ROOT"] = str(root / "static")  # the stack's env copies it
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "PORTAL_DEBUG": "0",
           "PORTAL_SECRET_KEY": secrets.token_urlsafe(64)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   cwd=REPO, env=env, check=True, timeout=300)


def load(browser, state: dict, url: str) -> dict:
    context = browser.new_context(storage_state=state, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(url, wait_until="load")
    page.wait_for_timeout(300)  # loadEventEnd is set after the load handlers return
    figures = page.evaluate(MEASURE)
    page.reload(wait_until="load")
    page.wait_for_timeout(300)
    figures["repeat"] = {k: v for k, v in page.evaluate(MEASURE).items() if k != "resources"}
    context.close()
    return figures


def bench(portal_url: str, loads: int) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_binary(), headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{portal_url}/login/")
        page.get_by_label("User name").fill("researcher")
        page.get_by_label("Password").fill("researcher-demo-pass")
        page.get_by_role("button", name="Log in").click()
        page.get_by_label("Project", exact=True).select_option(label="vision-lab")
        page.get_by_role("button", name="Switch").click()
        page.wait_for_load_state("load")
        state = context.storage_state()
        context.close()
        load(browser, state, portal_url + PAGE)  # warm-up: the server's first request
        runs = [load(browser, state, portal_url + PAGE) for _ in range(loads)]
        version = browser.version
        browser.close()

    def median(key: str, repeat: bool = False) -> float:
        values = [(r["repeat"] if repeat else r)[key] for r in runs]
        return round(statistics.median(v for v in values if v is not None), 1)

    return {
        "page": PAGE, "loads": loads, "chromium": version,
        "first_visit": {k: median(k) for k in ("bytes", "html_bytes", "decoded_bytes",
                                                "requests", "ttfb_ms", "fcp_ms", "dcl_ms",
                                                "load_ms")},
        "repeat_visit": {k: median(k, repeat=True) for k in ("bytes", "requests", "fcp_ms",
                                                              "load_ms")},
        "resources": runs[0]["resources"],
        "fcp_each_ms": [round(r["fcp_ms"], 1) for r in runs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="browser-bench-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)  # PostgreSQL runs as its own user when this runs as root
        collect_static(root)
        stack = Stack(root)
        try:
            started = time.monotonic()
            stack.start()
            print(f"stack up in {time.monotonic() - started:.0f}s: {stack.web_server}",
                  file=sys.stderr)
            figures = bench(stack.portal_url, args.loads)
        finally:
            stack.close()
    figures["machine"] = f"{platform.node()}: {os.cpu_count()} CPUs, {platform.platform()}"
    first, repeat = figures["first_visit"], figures["repeat_visit"]
    print(f"launch page, median of {args.loads} first visits: {first['bytes'] / 1024:.1f} KiB "
          f"transferred in {first['requests']:.0f} requests ({first['decoded_bytes'] / 1024:.1f} "
          f"KiB decoded), first-contentful-paint {first['fcp_ms']:.0f} ms, DOMContentLoaded "
          f"{first['dcl_ms']:.0f} ms, load {first['load_ms']:.0f} ms (TTFB "
          f"{first['ttfb_ms']:.0f} ms)")
    print(f"repeat visit: {repeat['bytes'] / 1024:.1f} KiB in {repeat['requests']:.0f} requests, "
          f"first-contentful-paint {repeat['fcp_ms']:.0f} ms")
    for name, sent, decoded in figures["resources"]:
        print(f"  {name}: {sent} B sent, {decoded} B decoded")
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
