"""The browser journeys' harness: Debian's Chromium driven by Playwright against pytest-django's
live_server, with the real Celery workers (launch/stop and the lifecycle tracker) and beat
running as subprocesses on the test database, the test Redis, the session's Keystone and kubesim.

What a journey sees is what a user sees: nothing here is mocked. A failing journey leaves a
screenshot of every open page under .test-output/browser/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from stack.browser import chromium_binary
from stack.procs import REPO
from tests.fixtures.processes import PortalProcesses
from tests.support.waiting import eventually

OUTPUT = REPO / ".test-output" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
WORKER_START_TIMEOUT = 90.0
# the pages poll every 3 s and the tracker follows the cluster by watch; under a loaded CI
# machine a state change still shows within seconds, so this only bounds a broken run
STATE_TIMEOUT_MS = 60_000


@pytest.fixture(scope="package", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API runs an event loop in the main thread; Django then refuses ORM
    calls from it as if they came from async code. The journeys call the ORM synchronously,
    between page steps."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


# pytest-playwright keeps Playwright (and so its event loop in the main thread) for the whole
# session; the tests that run after these would then find a running loop (asyncio.run fails,
# Django refuses ORM calls). Here Playwright lives as long as this package's tests.

@pytest.fixture(scope="package")
def playwright(django_db_setup, _pw_api_request_contexts) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    keep_serialized_contents()  # before the loop starts
    pw = sync_playwright().start()
    if _pw_api_request_contexts:
        _pw_api_request_contexts.instrument(pw)
    yield pw
    pw.stop()


def keep_serialized_contents() -> None:
    """serialized_rollback restores the migrations' data (the templates) from
    `connection._test_serialized_contents`, set on the connection object that created the
    test database. Django keeps connections per thread, but per execution context while an
    event loop runs in the thread (asgiref Local), as Playwright's does: the journeys get other
    connection objects, without it, and would start with no templates. Kept on the class,
    every connection object of the session has it."""
    from django.db import connections

    connection = connections["default"]
    contents = getattr(connection, "_test_serialized_contents", None)
    if contents is not None:
        type(connection)._test_serialized_contents = contents


def restore_migration_data() -> None:
    """The database as the migrations left it, as a serialized_rollback test's teardown and
    setup leave it."""
    from django.db import connections

    connection = connections["default"]
    call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=True)
    connection.creation.deserialize_db_from_string(connection._test_serialized_contents)


@pytest.fixture(scope="package")
def browser_type(playwright, browser_name: str):
    return getattr(playwright, browser_name)


@pytest.fixture(scope="package")
def launch_browser(browser_type_launch_args: dict, browser_type):
    def launch(**kwargs):
        return browser_type.launch(**{**browser_type_launch_args, **kwargs})

    return launch


@pytest.fixture(scope="package")
def browser(launch_browser) -> Iterator[object]:
    browser = launch_browser()
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    return {**browser_type_launch_args, "executable_path": chromium_binary(),
            "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture
def page(page) -> Iterator[object]:
    """pytest-playwright's page, failing its test when the portal's Content-Security-Policy
    refused anything on it (Chromium says so on the console: "Refused to … because it violates
    the following Content Security Policy directive"), in any page it showed."""
    refusals: list[str] = []
    page.on("console", lambda message: refusals.append(message.text)
            if "Content Security Policy" in message.text else None)
    yield page
    assert refusals == [], refusals


@pytest.fixture(scope="package")
def browser_context_args() -> dict:
    # a laptop's window, a user's locale and time zone that differ from the server's (UTC)
    return {"viewport": {"width": 1280, "height": 800}, "locale": "en-GB",
            "timezone_id": "Europe/Berlin"}


@pytest.fixture(scope="package")
def celery_processes(django_db_setup, django_db_blocker, kubesim, keystone, redis_server,
                     tmp_path_factory) -> Iterator[PortalProcesses]:
    """A worker for launches and stops (a single process here), the tracker and beat for the
    periodic tasks, as the demo runs them, for the whole package."""
    from django.core.cache import cache

    from portal.celery import app
    from workloads.tracking.index import LOCK_KEY

    OUTPUT.mkdir(parents=True, exist_ok=True)
    processes = PortalProcesses(OUTPUT, str(kubesim.kubeconfig), env={
        # samples every few seconds, so that a chart has points within a journey
        "PORTAL_USAGE_SCRAPE_INTERVAL": "3"})
    app.control.purge()  # tasks other tests enqueued with no worker running
    try:
        processes.worker(queues="celery", concurrency=1, pool="solo").start(WORKER_START_TIMEOUT)
        processes.launch_worker(concurrency=4).start(WORKER_START_TIMEOUT)
        processes.tracker().start(WORKER_START_TIMEOUT)
        processes.beat().start(WORKER_START_TIMEOUT)
        yield processes
    finally:
        processes.stop_all(cold=True)
        # a tracker cut short leaves its lease until it lapses; later tests track too
        cache.delete(LOCK_KEY)
        # what they wrote after the last journey's flush (samples, cursors) would be found by
        # the tests that come next: the database back to its state after the migrations
        with django_db_blocker.unblock():
            restore_migration_data()


# --- the journeys' data and steps ------------------------------------------------------------

@pytest.fixture
def vision_lab(login, gpu_types, cluster, celery_processes):
    """vision-lab as the demo has it (4 a100, 4 v100, 8 GPUs in all), its namespace reconciled
    by the worker (as in production: the quota change enqueues it) and none of earlier tests'
    workloads left in the cluster."""
    from django.utils import timezone

    from kube.client import Kube
    from tenants.models import Tenant
    from tenants.services import quota_update
    from tests.support.cluster import remove_workload_objects
    from tests.workloads.api_calls import DEMO_QUOTA

    with cluster.api_client() as client:
        remove_workload_objects(Kube(client))
    login("researcher")  # records vision-lab and nlp-lab
    tenant = Tenant.objects.get(name="vision-lab")
    changed_at = timezone.now()
    quota_update(tenant=tenant, acting_user=None, changes=DEMO_QUOTA)
    in_shape = (Tenant.State.PROVISIONED, Tenant.State.DRIFTED)  # drifted: it was repaired
    eventually(lambda: Tenant.objects.filter(pk=tenant.pk, state__in=in_shape,
                                             last_reconciled_at__gt=changed_at).exists(),
               timeout=60, message="the worker reconciles vision-lab's namespace")
    return tenant


@pytest.fixture
def log_in(live_server):
    """Log a page in through the login form, as `username` with the demo password."""
    from playwright.sync_api import expect

    def _log_in(page, username: str) -> None:
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(f"{username}-demo-pass")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("navigation", name="Account")).to_contain_text(username)

    return _log_in


def switch_project(page, name: str) -> None:
    from playwright.sync_api import expect

    page.get_by_label("Project", exact=True).select_option(label=name)
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(name)


# --- screenshots of failed journeys -------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.when not in ("setup", "call"):
        return
    browser = item.funcargs.get("browser")
    if browser is None:
        return
    OUTPUT.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name)
    shots = []
    for c, context in enumerate(browser.contexts):
        for p, page in enumerate(context.pages):
            path = OUTPUT / f"{name}-{c}-{p}.png"
            try:
                page.screenshot(path=str(path), full_page=True)
            except Exception as exc:  # noqa: BLE001 - the page may be gone; report what is
                shots.append(f"{path}: not taken ({exc})")
            else:
                shots.append(str(path))
    if shots:
        report.sections.append(("screenshots", "\n".join(shots)))
