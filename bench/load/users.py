"""The simulated users of the load test: Keystone identities, the steady browsing loop and the
launch burst.

Every user is a member of one project (tenant); there are ten users per project. A user signs in
twice, as a researcher who uses both the browser and a script: the login form (a session
cookie, for the pages) and a project-scoped Keystone token (X-Auth-Token, for the API). Then,
until the end of the phase, after a think time (uniform, 2–10 s by default), it does one thing:

    GET  /api/v1/workloads/            GET  /workloads/              (the list page)
    GET  /api/v1/workloads/{id}/       GET  /workloads/{id}/         (the workload page)
    GET  /api/v1/workloads/{id}/events/  GET /workloads/{id}/live/   (its htmx poll)
    GET  /api/v1/gpu-types/
    POST /api/v1/workloads/            (when it has no live workload)
    POST /api/v1/workloads/{id}/stop/  (its live workload, after it has run ≥ 20 s)

Within the quotas: a user has at most one live workload of one GPU, of the type its slot in
the project gives (slots 0–5 A100, 6–8 V100, 9 T4), and launches again only after it has seen
the previous one end; a project's quota (6 A100, 3 V100, 1 T4, 10 GPUs in all) holds all ten.
Half the launches are Jupyter services (stopped by their user), half batch jobs that run
30–120 s (kubesim's KUBESIM_RUN_SECONDS) unless stopped first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

import httpx
from measure import ERROR, OK, REFUSED, Recorder

USERS_PER_PROJECT = 10
SLOT_TYPES = ("a100",) * 6 + ("v100",) * 3 + ("t4",)
PROJECT_QUOTA = {"gpus_total": 10, "gpus_by_type": {"a100": 6, "v100": 3, "t4": 1},
                 "cpu": 64, "memory_gb": 512, "max_workloads": 20}
LIVE = ("submitted", "creating", "pending", "running", "stopping")
DONE = ("succeeded", "failed", "stopped")
CLIENT_TIMEOUT = 60.0
KEEPALIVE_EXPIRY = 4.0


def project_name(index: int) -> str:
    return f"load-lab-{index:02d}"


@dataclasses.dataclass
class Identity:
    name: str
    password: str
    project: str
    gpu_type: str


def identities(users: int) -> list[Identity]:
    """User i is slot i // projects of project i % projects, so any prefix of the list spreads
    over every project."""
    projects = max(1, -(-users // USERS_PER_PROJECT))
    return [Identity(f"load-user-{i:03d}", f"load-pass-{i:03d}", project_name(i % projects),
                     SLOT_TYPES[(i // projects) % len(SLOT_TYPES)]) for i in range(users)]


def launch_body(name: str, gpu_type: str, rng: random.Random, *, run_seconds: int) -> dict:
    if rng.random() < 0.5:
        return {"name": name, "template": "jupyter", "gpu_type": gpu_type, "gpu_count": 1,
                "cpu": 1, "memory": 4}
    return {"name": name, "template": "custom", "kind": "batch", "image": "busybox:1.36",
            "command": ["sleep", "infinity"], "gpu_type": gpu_type, "gpu_count": 1,
            "cpu": 1, "memory": 4, "env": {"KUBESIM_RUN_SECONDS": str(run_seconds)}}


class User:
    def __init__(self, ident: Identity, *, portal: str, keystone: str, recorder: Recorder,
                 seed: int) -> None:
        self.ident = ident
        self.portal = portal
        self.keystone = keystone
        self.rec = recorder
        self.rng = random.Random(seed)
        # idle connections are dropped before the server's keep-alive (5 s in the image's
        # gunicorn.conf.py) closes them: a request sent on a connection the server is closing
        # at that moment fails with a ReadError (the 200-user rehearsal saw one). Browsers
        # retry such a request; httpx does not.
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=4,
                              keepalive_expiry=KEEPALIVE_EXPIRY)
        self.browser = httpx.AsyncClient(base_url=portal, timeout=CLIENT_TIMEOUT, limits=limits)
        self.api = httpx.AsyncClient(base_url=portal, timeout=CLIENT_TIMEOUT, limits=limits)
        self.workload: dict | None = None  # its live (or last) workload, as the API showed it
        self.seen_ids: list[int] = []
        self.launched_at = 0.0
        self.launches = 0
        self.signed_in = False
        self.session = False  # the login form succeeded

    async def close(self) -> None:
        await self.browser.aclose()
        await self.api.aclose()

    # --- one request, timed and classified --------------------------------------------
    async def call(self, client: httpx.AsyncClient, endpoint: str, method: str, url: str, *,
                   expect: tuple[int, ...], **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = await client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.rec.add(endpoint, time.perf_counter() - started, ERROR, None,
                         f"{type(exc).__name__}: {exc}")
            return None
        elapsed = time.perf_counter() - started
        if response.status_code in expect:
            self.rec.add(endpoint, elapsed, OK, response.status_code)
            return response
        if endpoint == "POST /api/v1/workloads/" and response.status_code == 403 and \
                _code(response) == "quota_exceeded":
            self.rec.add(endpoint, elapsed, REFUSED, 403)
            return response
        self.rec.add(endpoint, elapsed, ERROR, response.status_code, response.text)
        return None

    # --- signing in -------------------------------------------------------------------
    async def sign_in(self, tries: int = 3) -> bool:
        """The login form and a token; a user who fails tries again a little later (each
        failed attempt stays counted as an error)."""
        for attempt in range(tries):
            if await self._sign_in():
                self.signed_in = True
                return True
            await asyncio.sleep(5 * (attempt + 1))
        return False

    async def _sign_in(self) -> bool:
        if "X-Auth-Token" not in self.api.headers:
            token = await self.call(
                self.api, "POST keystone /v3/auth/tokens", "POST",
                f"{self.keystone}/auth/tokens", expect=(201,), json={"auth": {
                    "identity": {"methods": ["password"], "password": {"user": {
                        "name": self.ident.name, "domain": {"id": "default"},
                        "password": self.ident.password}}},
                    "scope": {"project": {"name": self.ident.project,
                                          "domain": {"id": "default"}}}}})
            if token is not None:
                self.api.headers["X-Auth-Token"] = token.headers["X-Subject-Token"]
        if not self.session:
            page = await self.call(self.browser, "GET /login/", "GET", "/login/",
                                   expect=(200,))
            csrf = self.browser.cookies.get("csrftoken")
            if page is not None and csrf:
                self.session = await self.call(
                    self.browser, "POST /login/", "POST", "/login/", expect=(302,),
                    data={"username": self.ident.name, "password": self.ident.password,
                          "domain": "Default", "csrfmiddlewaretoken": csrf},
                    headers={"Referer": f"{self.portal}/login/"}) is not None
        return self.session and "X-Auth-Token" in self.api.headers

    # --- what a user does -------------------------------------------------------------
    def _live(self) -> bool:
        return self.workload is not None and self.workload["state"] in LIVE

    def _pick(self) -> str:
        choices = {"api_list": 3, "api_detail": 2, "api_events": 1, "gpu_types": 1,
                   "page_list": 2, "page_detail": 2, "page_live": 2}
        if not self._live():
            choices["launch"] = 2
        elif self.workload["state"] in ("pending", "running") and \
                time.monotonic() - self.launched_at >= 20:
            choices["stop"] = 2
        if not self.seen_ids:
            for name in ("api_detail", "api_events", "page_detail", "page_live"):
                choices.pop(name)
        names = list(choices)
        return self.rng.choices(names, weights=[choices[n] for n in names])[0]

    def _some_id(self) -> int:
        if self.workload is not None and self.rng.random() < 0.7:
            return self.workload["id"]
        return self.rng.choice(self.seen_ids)

    async def act(self, action: str) -> None:
        if action == "api_list":
            response = await self.call(self.api, "GET /api/v1/workloads/", "GET",
                                       "/api/v1/workloads/", expect=(200,))
            if response is not None:
                self.seen_ids = [w["id"] for w in response.json()["results"]][:20] or \
                    self.seen_ids
        elif action == "api_detail":
            await self._refresh(self._some_id())
        elif action == "api_events":
            await self.call(self.api, "GET /api/v1/workloads/{id}/events/", "GET",
                            f"/api/v1/workloads/{self._some_id()}/events/", expect=(200,))
        elif action == "gpu_types":
            await self.call(self.api, "GET /api/v1/gpu-types/", "GET", "/api/v1/gpu-types/",
                            expect=(200,))
        elif action == "page_list":
            await self.call(self.browser, "GET /workloads/", "GET", "/workloads/",
                            expect=(200,))
        elif action == "page_detail":
            await self.call(self.browser, "GET /workloads/{id}/", "GET",
                            f"/workloads/{self._some_id()}/", expect=(200,))
        elif action == "page_live":
            await self.call(self.browser, "GET /workloads/{id}/live/ (htmx)", "GET",
                            f"/workloads/{self._some_id()}/live/", expect=(200,),
                            headers={"HX-Request": "true"})
        elif action == "launch":
            await self.launch(run_seconds=self.rng.randint(30, 120))
        elif action == "stop":
            await self.stop()

    async def _refresh(self, workload_id: int) -> None:
        response = await self.call(self.api, "GET /api/v1/workloads/{id}/", "GET",
                                   f"/api/v1/workloads/{workload_id}/", expect=(200,))
        if response is not None and self.workload is not None and \
                workload_id == self.workload["id"]:
            self.workload = response.json()

    async def launch(self, *, run_seconds: int) -> httpx.Response | None:
        self.launches += 1
        body = launch_body(f"{self.ident.name} {self.launches}", self.ident.gpu_type, self.rng,
                           run_seconds=run_seconds)
        response = await self.call(self.api, "POST /api/v1/workloads/", "POST",
                                   "/api/v1/workloads/", expect=(201,), json=body)
        if response is not None and response.status_code == 201:
            self.workload = response.json()
            self.launched_at = time.monotonic()
            self.seen_ids = [self.workload["id"], *self.seen_ids][:20]
        return response

    async def stop(self) -> None:
        response = await self.call(self.api, "POST /api/v1/workloads/{id}/stop/", "POST",
                                   f"/api/v1/workloads/{self.workload['id']}/stop/",
                                   expect=(202,))
        if response is not None:
            self.workload = response.json()

    async def browse(self, until: float, think: tuple[float, float]) -> None:
        while True:
            await asyncio.sleep(self.rng.uniform(*think))
            if time.monotonic() >= until:
                return
            if self._live() and self.rng.random() < 0.5:  # a user keeps an eye on its own
                await self._refresh(self.workload["id"])
                if time.monotonic() >= until:
                    return
            await self.act(self._pick())


def _code(response: httpx.Response) -> str | None:
    try:
        return response.json().get("code")
    except ValueError:
        return None
