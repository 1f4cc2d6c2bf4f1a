"""A Celery worker killed (SIGKILL) in the middle of a burst of 50 launches: after a restart,
every accepted launch has exactly one set of Kubernetes objects or a failure reason; no
duplicates, no orphans."""

import threading

import pytest
from django.db import connection
from django.test import Client

from portal.kube.client import Kube
from portal.workloads.models import Workload
from portal.workloads.tasks import workloads_requeue_stale
from tests.faults.conftest import launch_body, launch_problems, wait_until

LAUNCHES = 50
CALLERS = 5  # API clients launching at the same time
KILL_AFTER = 8  # workloads in the cluster when the worker is killed

State = Workload.State


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_worker_killed_mid_burst_loses_and_duplicates_no_launch(lab, portal_processes):
    # the sweep's threshold: a launch with no progress for this long is handed out again
    sweep_env = {"PORTAL_LAUNCH_REQUEUE_SECONDS": "4"}
    worker = portal_processes.worker(concurrency=2, env=sweep_env).start()
    accepted: list[int] = []
    refused: list[str] = []

    def caller(n: int) -> None:
        client = Client(raise_request_exception=False)
        try:
            for i in range(n, LAUNCHES, CALLERS):
                response = client.post("/api/v1/workloads/", launch_body(i),
                                       content_type="application/json", **lab.headers)
                if response.status_code == 201:
                    accepted.append(response.json()["id"])
                else:
                    refused.append(f"{response.status_code} {response.content[:300]!r}")
        finally:
            connection.close()

    callers = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
    for thread in callers:
        thread.start()
    try:
        wait_until(lambda: Workload.objects.filter(state=State.PENDING).count() >= KILL_AFTER,
                   timeout=60, what=f"{KILL_AFTER} launches created by the worker")
        worker.kill()
        in_flight = Workload.objects.filter(state__in=[State.SUBMITTED, State.CREATING]).count()
    finally:
        for thread in callers:
            thread.join(timeout=120)
    assert not refused, refused[:3]
    assert len(accepted) == LAUNCHES
    assert in_flight > 0  # the kill did land in the middle of the burst

    portal_processes.worker(concurrency=2, env=sweep_env).start()
    accepted_ids = set(accepted)

    def settled() -> bool:
        waiting = Workload.objects.filter(pk__in=accepted_ids,
                                          state__in=[State.SUBMITTED, State.CREATING])
        if not waiting.exists():
            return True
        workloads_requeue_stale.delay()  # what beat sends every 30 s
        return False

    wait_until(settled, timeout=90, what="every launch past creation", interval=2.0)
    problems = launch_problems(accepted_ids, Kube())
    assert not problems, problems
    assert Workload.objects.filter(tenant=lab.tenant).count() == LAUNCHES
