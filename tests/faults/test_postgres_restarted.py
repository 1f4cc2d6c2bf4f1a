"""PostgreSQL restarted: while it is down, requests fail cleanly — 503 with Retry-After, the
API's error format or a short page, never a 500 with a stack trace — and Celery tasks retry
instead of dropping a launch; once it is back, the same processes serve again by themselves."""

import httpx
import pytest

from kube.client import Kube
from stack.procs import free_port
from tests.faults.conftest import browser_login, launch_body, launch_problems
from tests.support.waiting import eventually
from workloads.models import Workload

State = Workload.State


def assert_clean_503(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.request.url, response.status_code,
                                         response.text[:1000])
    assert "Traceback" not in response.text
    assert response.headers.get("Retry-After")


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_postgres_down_answers_503_and_everything_recovers_by_itself(lab, portal_processes,
                                                                    postgres_restartable):
    port = free_port()
    portal_processes.web(port).start()
    base = f"http://127.0.0.1:{port}"
    browser = browser_login(base, "researcher")
    api = httpx.Client(base_url=base, timeout=30, headers={"X-Auth-Token": lab.token})
    assert browser.get("/").status_code == 200
    assert api.get("/api/v1/workloads/").status_code == 200
    # accepted while no worker runs: their create tasks wait in Redis
    queued = {api.post("/api/v1/workloads/", json=launch_body(i)).json()["id"] for i in range(3)}
    worker = portal_processes.launch_worker()

    postgres_restartable.stop_fast()
    try:
        assert_clean_503(browser.get("/"))  # the session itself lives in the database
        assert_clean_503(browser.get("/workloads/"))
        for response in (api.get("/api/v1/workloads/"),
                         api.post("/api/v1/workloads/", json=launch_body(9))):
            assert_clean_503(response)
            assert response.json()["code"] == "database_unavailable"
            assert response.json()["detail"]
        # the API through the browser's session: its middleware meets the database first
        assert_clean_503(browser.get("/api/v1/workloads/"))
        assert browser.get("/api/v1/workloads/").json()["code"] == "database_unavailable"
        # signing in needs the database too (sessions, the login throttle)
        visitor = httpx.Client(base_url=base, timeout=30)
        form = visitor.get("/login/")
        assert form.status_code in (200, 503), form.text[:1000]
        if form.status_code == 503:
            assert_clean_503(form)
        assert_clean_503(visitor.post("/login/", data={
            "username": "lead", "password": "lead-demo-pass", "domain": "Default",
            "csrfmiddlewaretoken": visitor.cookies.get("csrftoken", "")}))
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"].startswith("failed")
        # the worker takes the queued launches now: its tasks must retry, not drop them
        worker.start()
        eventually(lambda: worker.log().count("retry: Retry in") >= len(queued),
                   timeout=30, message=lambda: f"the worker retrying:\n{worker.log()[-3000:]}")
    finally:
        postgres_restartable.start_again()

    # the web process recovers without a restart (CONN_HEALTH_CHECKS replaces dead connections)
    eventually(lambda: browser.get("/").status_code == 200, timeout=30, message="pages again")
    assert api.get("/api/v1/workloads/").status_code == 200
    assert browser_login(base, "lead").get("/").status_code == 200
    again = api.post("/api/v1/workloads/", json=launch_body(10))
    assert again.status_code == 201, again.text[:1000]
    # and the worker's retries create every launch, no sweep needed
    accepted = queued | {again.json()["id"]}
    eventually(lambda: not Workload.objects.filter(
        pk__in=accepted, state__in=[State.SUBMITTED, State.CREATING]).exists(),
        timeout=60, message="the queued launches created after the database came back")
    problems = launch_problems(accepted, Kube())
    assert not problems, problems
