"""Fault injection: the portal's real processes, and the parts they depend on failing under them.

Each test runs real subprocesses on loopback — Celery workers (`celery -A portal worker`), a
gunicorn web server where the test needs a portal process of its own (tests/fixtures/
processes.py) — on the test database of this run, the session's Redis and Keystone, and a
kubesim of its own (`fault_cluster`) that a test may stop and start again with its saved state. Every process
is stopped when the test ends, whatever happened; a part the test stopped (Redis, PostgreSQL,
Keystone) is running again before the next test.

Waits poll a condition until a deadline (`eventually`, tests/support/waiting.py); nothing here
sleeps for a fixed time.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kube.client import Kube
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.fixtures.processes import PortalProcesses

WORKLOAD_LABEL = "gpu-portal.io/workload-id"
OBJECT_KINDS = ("Deployment", "Service", "Secret", "Job")
# room for every launch a test makes: admission never refuses one here
ROOMY_QUOTA = {"gpus_total": 400, "gpus_by_type": {"a100": 200, "v100": 200, "t4": 0},
               "max_workloads": 400, "cpu": 4000, "memory_gb": 40000}


@pytest.fixture
def fault_cluster(kubesim_factory, settings):
    """A kubesim of this test's own (demo inventory, a state file), that the test may stop and
    start again; the portal in the test process points at it."""
    server = kubesim_factory(inventory=DEMO_INVENTORY)
    settings.KUBECONFIG = server.kubeconfig
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def portal_processes(transactional_db, fault_cluster, tmp_path):
    """Start portal processes with `.worker()` / `.web()`; all are stopped after the test (before
    the test database is flushed). Queued tasks of earlier tests are purged first."""
    from portal.celery import app

    app.control.purge()
    processes = PortalProcesses(tmp_path, fault_cluster.kubeconfig)
    try:
        yield processes
    finally:
        processes.stop_all()


@dataclasses.dataclass
class Lab:
    """vision-lab, provisioned in the test's cluster, with room for every launch."""

    tenant: Any
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"HTTP_X_AUTH_TOKEN": self.token}


@pytest.fixture
def lab(login, gpu_types, fault_cluster, project_token) -> Lab:
    from tenants.models import Tenant
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update

    login("researcher")  # records vision-lab and nlp-lab as tenants
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes=ROOMY_QUOTA)
    tenant_reconcile(tenant_id=tenant.pk)
    return Lab(tenant=tenant, token=project_token("researcher", "vision-lab"))


def launch_body(i: int, *, kind: str = "batch") -> dict[str, Any]:
    if kind == "batch":
        return {"name": f"fault {i}", "template": "custom", "kind": "batch", "gpu_type": "a100",
                "gpu_count": 1, "image": "busybox:1.36", "command": ["sleep", "1"]}
    return {"name": f"fault {i}", "template": "jupyter", "gpu_type": "v100", "gpu_count": 1}


class Burst:
    """`launches` API launches from `callers` clients at once (threads); every answer is kept."""

    def __init__(self, headers: dict[str, str], *, launches: int = 50, callers: int = 5) -> None:
        self.headers = headers
        self.launches = launches
        self.answers: list[tuple[int, Any]] = []  # (status, JSON body or raw bytes)
        self._threads = [threading.Thread(target=self._caller, args=(n, callers), daemon=True)
                         for n in range(callers)]

    def _caller(self, first: int, step: int) -> None:
        from django.db import connection
        from django.test import Client

        client = Client(raise_request_exception=False)
        try:
            for i in range(first, self.launches, step):
                response = client.post("/api/v1/workloads/", launch_body(i),
                                       content_type="application/json", **self.headers)
                try:
                    body = response.json()
                except ValueError:
                    body = response.content[:500]
                self.answers.append((response.status_code, body))
        finally:
            connection.close()

    def start(self) -> Burst:
        for thread in self._threads:
            thread.start()
        return self

    def join(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self._threads), "launch burst did not finish"

    @property
    def accepted(self) -> set[int]:
        return {body["id"] for status, body in self.answers if status == 201}

    @property
    def not_accepted(self) -> list[tuple[int, Any]]:
        return [(status, body) for status, body in self.answers if status != 201]


def cluster_objects(kube: Kube) -> dict[int, collections.Counter[str]]:
    """Every object labelled with a workload id, counted by kind per id."""
    found: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for kind in OBJECT_KINDS:
        for obj in kube.list(kind, label_selector=WORKLOAD_LABEL)["items"]:
            found[int(obj["metadata"]["labels"][WORKLOAD_LABEL])][kind] += 1
    return found


def expected_objects(workload) -> collections.Counter[str]:
    """The kinds a workload's one set of objects has (from the manifest functions)."""
    from workloads.manifests import workload_objects
    from workloads.objects import workload_spec

    return collections.Counter(obj["kind"] for obj in workload_objects(workload_spec(workload)))


def launch_problems(accepted: set[int], kube: Kube) -> list[str]:
    """What is wrong with the end state of these accepted launches: each must have exactly one
    set of Kubernetes objects, or have failed with a reason (or been stopped: none); nothing labelled as a workload may
    exist for an id the database does not know. Empty when all is well."""
    from workloads.models import Workload

    workloads = {w.pk: w for w in Workload.objects.select_related(
        "tenant", "owner", "template", "gpu_type").filter(pk__in=accepted)}
    problems = [f"accepted launch {wid} is not in the database"
                for wid in sorted(accepted - workloads.keys())]
    found = cluster_objects(kube)
    for wid, workload in sorted(workloads.items()):
        have = found.get(wid, collections.Counter())
        if workload.state == Workload.State.FAILED:
            if not workload.reason:
                problems.append(f"workload {wid} failed without a reason")
            continue
        if workload.state == Workload.State.STOPPED:
            if have:
                problems.append(f"stopped workload {wid} still has {dict(have)}")
            continue
        if workload.state in (Workload.State.SUBMITTED, Workload.State.CREATING):
            problems.append(f"workload {wid} is still {workload.state}")
        if have != expected_objects(workload):
            problems.append(f"workload {wid} ({workload.state}) has {dict(have)}, "
                            f"expected {dict(expected_objects(workload))}")
    known = set(Workload.objects.filter(pk__in=found.keys()).values_list("pk", flat=True))
    problems += [f"orphan objects {dict(found[wid])} for unknown workload {wid}"
                 for wid in sorted(found.keys() - known)]
    return problems


class SessionRedis:
    """The session's Redis (tests/fixtures/stack.py), stopped and started again on its port.
    Ephemeral like the deployed one is allowed to be: a restart loses what was queued."""

    def __init__(self, proc: subprocess.Popen, stack_dir: Path) -> None:
        self.proc: subprocess.Popen | None = proc
        self.port = int(os.environ["TEST_REDIS_PORT"])
        self.stack_dir = stack_dir

    def stop(self) -> None:
        from stack.procs import stop

        stop(self.proc)
        self.proc = None

    def start(self) -> None:
        from stack.redis import start_redis

        if self.proc is None or self.proc.poll() is not None:
            self.proc = start_redis(self.port, self.stack_dir / "redis",
                                    self.stack_dir / "redis.log")


@pytest.fixture(scope="session")
def session_redis(redis_server, stack_dir):
    handle = SessionRedis(redis_server, stack_dir)
    yield handle
    if handle.proc is not redis_server:  # a restarted one: the session fixture only knows the first
        handle.stop()


@pytest.fixture
def redis_restartable(session_redis):
    """The session's Redis, running again after the test whatever the test did to it."""
    try:
        yield session_redis
    finally:
        session_redis.start()


def launches_settled(accepted: set[int]) -> Callable[[], bool]:
    """A wait condition: no accepted launch still waits for creation. Until then each poll
    sends the stale-launch sweep, as beat does every 30 s (the worker's threshold decides
    which launches it hands out again)."""
    from workloads.models import Workload
    from workloads.tasks import workloads_requeue_stale

    def settled() -> bool:
        if not Workload.objects.filter(pk__in=accepted, state__in=[
                Workload.State.SUBMITTED, Workload.State.CREATING]).exists():
            return True
        workloads_requeue_stale.delay()
        return False

    return settled


@pytest.fixture
def postgres_restartable(postgres_server, stack_dir):
    """The session's PostgreSQL, to stop (fast shutdown) and start again on its port and data;
    running again after the test whatever the test did to it, and the test process's own
    connection (which died with the server) reopened."""
    from django.db import connections

    def start() -> None:
        if postgres_server.proc is None or postgres_server.proc.poll() is not None:
            postgres_server.start(stack_dir / "postgres.log")
        connections.close_all()

    postgres_server.start_again = start
    try:
        yield postgres_server
    finally:
        start()


def browser_login(base_url: str, username: str) -> Any:
    """An httpx client logged in through the portal's login form (CSRF and all)."""
    import httpx

    browser = httpx.Client(base_url=base_url, timeout=30, follow_redirects=False)
    browser.get("/login/")
    response = browser.post("/login/", data={
        "username": username, "password": f"{username}-demo-pass", "domain": "Default",
        "csrfmiddlewaretoken": browser.cookies["csrftoken"]})
    assert response.status_code == 302, response.text[:2000]
    return browser


@pytest.fixture
def keystone_restartable(keystone):
    """The session's Keystone, to stop and start again on its port with its database and keys;
    running again after the test whatever the test did to it."""
    from stack.procs import stop

    def stop_keystone() -> None:
        stop(keystone.proc)

    def start_keystone() -> None:
        if keystone.proc is None or keystone.proc.poll() is not None:
            keystone.proc = keystone.install.start(keystone.log_file)

    keystone.stop, keystone.start = stop_keystone, start_keystone
    try:
        yield keystone
    finally:
        start_keystone()
