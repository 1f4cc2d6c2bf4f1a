#!/usr/bin/env python
"""API authentication cost: `GET /api/v1/workloads/` with a Keystone token (X-Auth-Token)
against the same request with the browser session, and the token cache's hit rate.

    .venv/bin/python bench/api_auth_bench.py [--requests 300] [--warmup 20] [--misses 20]
                                             [--json out.json]

It starts on loopback, under a temporary folder, what the request path needs and stops it at
the end: PostgreSQL (fsync on), Redis, Keystone (fresh state; the virtualenv under .demo/ is
reused) and the portal (`manage.py runserver --noreload`, PORTAL_DEBUG=0, the production
settings: the throttle is on, with a rate the run never reaches). vision-lab gets 8 workloads
(launched through the API; no worker runs, so they stay `submitted`), so the list is a real
page of 8 rows.

Measured, interleaved in rounds of 10 so that drift hits both alike:
- token: researcher's vision-lab token in X-Auth-Token, reused as a script reuses it (the
  portal validates it with Keystone once, then trusts Redis for KEYSTONE_TOKEN_CACHE_TTL);
- session: the same user logged in through the login form, the session cookie sent.
- token, cache miss: the first request of each of `--misses` fresh tokens (Keystone asked).
The hit rate comes from the portal's own `portal_keystone_token_cache_total` at /metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

WAIT = 120.0
ENDPOINT = "/api/v1/workloads/"


class Stack:
    """PostgreSQL, Redis, Keystone and the portal; stopped in reverse order, whatever happens."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir()
        self.procs: list[subprocess.Popen] = []
        self.postgres = None
        self.keystone_url = ""
        self.portal_url = ""
        self.env: dict[str, str] = {}

    def popen(self, name: str, cmd: list[str], **kwargs) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        from stack.identities import seed_identities
        from stack.keystone import SERVICE_PASSWORD, KeystoneInstall
        from stack.postgres import PostgresServer
        from stack.procs import free_port, http_ok, wait_for
        from stack.redis import start_redis

        (self.root / "pg").mkdir(mode=0o755)
        self.postgres = PostgresServer(self.root / "pg" / "data", free_port())
        self.postgres.start(self.logs / "postgres.log", durable=True)
        redis_port = free_port()
        self.procs.append(start_redis(redis_port, self.root / "redis", self.logs / "redis.log"))
        keystone = KeystoneInstall(venv=REPO / ".demo" / "keystone-venv",
                                   state_dir=self.root / "keystone", port=free_port())
        keystone.ensure()
        self.procs.append(keystone.start(self.logs / "keystone.log"))
        seed_identities(keystone.url)
        self.keystone_url = keystone.url
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "portal.settings", "PORTAL_DEBUG": "0",
                    "PORTAL_TLS": "0", "PORTAL_SECRET_KEY": secrets.token_urlsafe(64),
                    "DATABASE_URL": self.postgres.url,
                    "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                    "KEYSTONE_URL": keystone.url, "KEYSTONE_SERVICE_PASSWORD": SERVICE_PASSWORD,
                    "KUBECONFIG": "", "PORTAL_API_THROTTLE_RATE": "1000000/minute",
                    "CELERY_BEAT_SCHEDULE_FILENAME": str(self.root / "celerybeat-schedule"),
                    # the login page needs the hashed static files of a production deployment
                    "PORTAL_STATIC_ROOT": str(self.root / "static")}
        for args in (("migrate", "--noinput", "-v", "0"), ("seed_demo",),
                     ("collectstatic", "--noinput", "-v", "0")):
            subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=self.env,
                           check=True, capture_output=True, timeout=180)
        port = free_port()
        self.portal_url = f"http://127.0.0.1:{port}"
        web = self.popen("web", [sys.executable, "manage.py", "runserver",
                                 f"127.0.0.1:{port}", "--noreload"], env=self.env)
        wait_for(lambda: http_ok(f"{self.portal_url}/healthz"), timeout=WAIT, what="portal",
                 proc=web)

    def close(self) -> None:
        from stack.procs import stop

        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            stop(proc, timeout=10)
        if self.postgres is not None:
            self.postgres.destroy()


def project_token(keystone_url: str, user: str = "researcher", project: str = "vision-lab"):
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=keystone_url, username=user, password=f"{user}-demo-pass",
                       user_domain_id="default", project_name=project,
                       project_domain_id="default")
    return auth.get_access(ks_session.Session(auth=auth)).auth_token


def http_client(portal_url: str) -> httpx.Client:
    # a connection per request: runserver writes headers and body in separate packets, and on
    # a kept-alive connection Nagle + delayed ACK add ~40 ms to either mode, hiding the rest
    return httpx.Client(base_url=portal_url, timeout=30, headers={"Connection": "close"})


def session_client(portal_url: str, project_name: str = "vision-lab") -> httpx.Client:
    client = http_client(portal_url)
    page = client.get("/login/")
    csrf = client.cookies.get("csrftoken")
    assert page.status_code == 200 and csrf, (page.status_code, page.text[:300])
    response = client.post("/login/", data={"username": "researcher",
                                             "password": "researcher-demo-pass",
                                             "domain": "Default",
                                             "csrfmiddlewaretoken": csrf},
                           headers={"Referer": f"{portal_url}/login/"})
    assert response.status_code == 302, response.text[:500]
    me = client.get("/api/v1/me/").json()
    if me["project"]["name"] != project_name:  # the same project as the token's
        project_id = next(t["keystone_project_id"]
                          for t in client.get("/api/v1/tenants/").json()["results"]
                          if t["name"] == project_name)
        csrf = client.cookies.get("csrftoken")
        client.post("/switch-project/", data={"project_id": project_id,
                                              "csrfmiddlewaretoken": csrf},
                    headers={"Referer": f"{portal_url}/"})
        assert client.get("/api/v1/me/").json()["project"]["name"] == project_name
    return client


def cache_counts(portal_url: str) -> dict[str, float]:
    text = httpx.get(f"{portal_url}/metrics", timeout=10).text
    counts = {"hit": 0.0, "miss": 0.0}
    for result in counts:
        match = re.search(rf'portal_keystone_token_cache_total{{result="{result}"}} ([0-9.e+]+)',
                          text)
        counts[result] = float(match.group(1)) if match else 0.0
    return counts


def timed_get(client: httpx.Client, headers: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    response = client.get(ENDPOINT, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
    return elapsed * 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "mean": statistics.fmean(ordered), "min": ordered[0], "max": ordered[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="per mode (default 300)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--misses", type=int, default=20, help="fresh tokens, first request each")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="api-auth-bench-"))
    os.chmod(root, 0o755)
    stack = Stack(root)
    try:
        t0 = time.monotonic()
        stack.start()
        print(f"[{time.monotonic() - t0:5.1f} s] stack up: {stack.portal_url}", flush=True)
        token = project_token(stack.keystone_url)
        token_client = http_client(stack.portal_url)
        auth = {"X-Auth-Token": token}
        for index in range(8):
            response = token_client.post(ENDPOINT, headers=auth, json={
                "name": f"bench {index}", "template": "jupyter", "gpu_type": "a100" if index < 4
                else "v100", "gpu_count": 1})
            assert response.status_code == 201, response.text[:300]
        browser = session_client(stack.portal_url)
        rows = browser.get(ENDPOINT).json()["count"]
        assert token_client.get(ENDPOINT, headers=auth).json()["count"] == rows == 8

        for _ in range(args.warmup):
            timed_get(token_client, auth)
            timed_get(browser)
        before = cache_counts(stack.portal_url)
        token_ms: list[float] = []
        session_ms: list[float] = []
        started = time.monotonic()
        while len(token_ms) < args.requests:
            for _ in range(10):
                token_ms.append(timed_get(token_client, auth))
            for _ in range(10):
                session_ms.append(timed_get(browser))
        steady_seconds = time.monotonic() - started
        after = cache_counts(stack.portal_url)

        miss_ms = []
        for _ in range(args.misses):
            fresh = project_token(stack.keystone_url)
            miss_ms.append(timed_get(token_client, {"X-Auth-Token": fresh}))
        final = cache_counts(stack.portal_url)

        hits = after["hit"] - before["hit"]
        misses = after["miss"] - before["miss"]
        figures = {
            "endpoint": f"GET {ENDPOINT} (8 rows)",
            "server": "manage.py runserver --noreload, PORTAL_DEBUG=0",
            "token": summary(token_ms), "session": summary(session_ms),
            "token_cache_miss": summary(miss_ms),
            "steady_run_seconds": steady_seconds,
            "cache_steady": {"hits": hits, "misses": misses,
                             "hit_rate": hits / (hits + misses) if hits + misses else None},
            "cache_whole_run": {"hits": final["hit"], "misses": final["miss"],
                                "hit_rate": final["hit"] / (final["hit"] + final["miss"])},
            "ttl_seconds": 60,
        }
        print(json.dumps(figures, indent=2))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    finally:
        stack.close()


if __name__ == "__main__":
    sys.exit(main())
