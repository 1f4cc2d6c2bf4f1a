"""Redis (the Celery broker and the cache) restarted during a burst of launches: no accepted
launch is lost — what Redis held is gone with it, and the periodic sweep re-enqueues the
launches that wait in the database — and no launch the database holds was answered with an
error (a client would launch it again)."""

import collections

import pytest

from kube.client import Kube
from tests.faults.conftest import Burst, launch_problems, launches_settled
from tests.fixtures.processes import restarted_when_it_exits
from tests.support.waiting import eventually
from workloads.models import Workload

STOP_AFTER = 6  # workloads in the cluster when Redis stops
DOWN_FOR = 10  # launches answered while Redis is down
SWEEP_ENV = {"PORTAL_LAUNCH_REQUEUE_SECONDS": "4"}

State = Workload.State


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_redis_restart_mid_burst_loses_no_accepted_launch(lab, portal_processes,
                                                            redis_restartable):
    sweeper = portal_processes.worker(env=SWEEP_ENV).start()  # the stale sweep
    worker = portal_processes.launch_worker(env=SWEEP_ENV).start()  # the launches
    burst = Burst(lab.headers).start()
    try:
        eventually(lambda: Workload.objects.filter(state=State.PENDING).count() >= STOP_AFTER,
                   timeout=60, message=f"{STOP_AFTER} launches created by the worker")
        redis_restartable.stop()
        answered = len(burst.answers)
        eventually(lambda: len(burst.answers) >= min(answered + DOWN_FOR, burst.launches),
                   timeout=60, message="launches answered while Redis is down")
        redis_restartable.start()
    finally:
        burst.join()
    # Celery's worker may exit when its broker connection breaks in the middle of a read
    # (kombu closes the dead channel and fails: "Unrecoverable error: AttributeError …
    # 'hostname'"), and its shutdown takes a moment after that; deployed, its Deployment starts
    # it again whenever it exits (restartPolicy Always), as here until the launches settle.
    # What it held is not lost: unacknowledged messages and the stale sweep bring it back.
    with restarted_when_it_exits(worker), restarted_when_it_exits(sweeper):
        # every launch the database holds was answered 201: none is launched twice by a retry
        committed = set(Workload.objects.filter(tenant=lab.tenant).values_list("pk", flat=True))
        answers = collections.Counter(status for status, _ in burst.answers)
        assert committed == burst.accepted, (
            f"{len(committed - burst.accepted)} launches in the database were not answered 201; "
            f"answers: {dict(answers)}")
        # and what was not accepted was refused cleanly, in the API's error format
        for status, body in burst.not_accepted:
            assert status == 503 and isinstance(body, dict) and body.get("code"), (status, body)
        assert len(burst.accepted) >= burst.launches - DOWN_FOR

        eventually(launches_settled(burst.accepted), timeout=90,
                   message="every launch past creation", interval=2.0)
        problems = launch_problems(burst.accepted, Kube())
        assert not problems, problems
