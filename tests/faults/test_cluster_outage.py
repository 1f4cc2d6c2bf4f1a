"""The cluster (kubesim) stopped during launches and tracking, for as long as the portal's tasks
take to retry four times with growing delays (some 10 s), then started again with its saved
state: the portal says the cluster is unreachable (the banner on its pages, /readyz), its tasks
retry with backoff, and it converges — every workload's state matches what the cluster shows."""

import re

import pytest
from django.test import Client

from kube.client import Kube
from tests.faults.conftest import cluster_objects, launch_body, launch_problems
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.tasks import workloads_requeue_stale

# the create task's retries (1, 2, 4, 8 s, asserted below) are all logged 7 s after its first try
RETRIES_LOGGED = (1, 2, 4, 8)
# how long the states may take to match the cluster once it is back; a fault cluster may ask
# for longer (`converge_seconds`: the real control plane's controllers come back more slowly)
CONVERGE_SECONDS = 90
BANNER = "The cluster is unreachable"

State = Workload.State


def cluster_verdict(workload: Workload, kube: Kube) -> str:
    """What the cluster shows for a workload, read directly (not through the tracker)."""
    kind, name = ("Job", "Deployment")[workload.kind == "service"], workload.object_name
    obj = kube.get(kind, name, workload.tenant.namespace)
    if obj is None:
        return "gone"
    status = obj.get("status") or {}
    if kind == "Job":
        return "succeeded" if status.get("succeeded") else "active"
    return "running" if status.get("readyReplicas") else "not ready"


def create_retries(log: str, delay: int | None = None) -> list[int]:
    """The delays the create tasks' retries said in the worker's log (only `delay`'s, if given)."""
    delays = [int(d) for d in re.findall(r"workload_create_task\[[^]]+\] retry: Retry in (\d+)s",
                                         log)]
    return [d for d in delays if delay is None or d == delay]


# the database's state ↔ what the cluster must show for it
AGREES = {State.SUCCEEDED: "succeeded", State.RUNNING: "running", State.STOPPED: "gone"}


def disagreements(expected: dict[int, str], kube: Kube) -> list[str]:
    wrong = []
    for workload in Workload.objects.select_related("tenant").filter(pk__in=expected):
        seen = cluster_verdict(workload, kube)
        if workload.state != expected[workload.pk] or AGREES.get(workload.state) != seen:
            wrong.append(f"{workload.pk} ({workload.kind}): {workload.state} "
                         f"({workload.reason}), cluster: {seen}")
    return wrong


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_cluster_outage_is_shown_retried_and_converges(lab, portal_processes, fault_cluster,
                                                         login, settings):
    worker = portal_processes.launch_worker()  # the launches and stops
    portal_processes.start(portal_processes.worker(),  # the probe and the sweep that beat sends
                           worker, portal_processes.tracker(),
                           portal_processes.beat())  # the cluster probe, the sweep
    browser = login("researcher")

    def launch(i: int, kind: str) -> int:
        response = Client().post("/api/v1/workloads/", launch_body(i, kind=kind),
                                 content_type="application/json", **lab.headers)
        assert response.status_code == 201, response.content
        return response.json()["id"]

    expected = {launch(0, "batch"): State.SUCCEEDED, launch(1, "service"): State.RUNNING}
    to_stop = launch(2, "service")
    expected[to_stop] = State.STOPPED
    eventually(lambda: Workload.objects.filter(pk__in=expected,
                                               state__in=[State.RUNNING, State.SUCCEEDED])
               .count() == len(expected), timeout=60, message="the first launches tracked")

    fault_cluster.stop()  # SIGTERM: it saves its state
    try:
        eventually(lambda: BANNER in browser.get("/workloads/").content.decode(), timeout=20,
                   message="the banner on the pages")
        ready = Client().get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["cluster"].startswith("failed")
        # launches are accepted while the cluster is away, and a stop is taken
        during = {launch(10, "batch"): State.SUCCEEDED, launch(11, "service"): State.RUNNING}
        expected.update(during)
        stop = Client().post(f"/api/v1/workloads/{to_stop}/stop/", **lab.headers)
        assert stop.status_code == 202, stop.content
        # a task waiting for its next try is not stalled: the sweep leaves it alone (it would
        # start a second chain of retries, and one more at every sweep while the outage lasts)
        eventually(lambda: len(re.findall(r"workload_stop_task\[[^]]+\] retry", worker.log()))
                   >= 4, timeout=20, message="the stop task retrying")
        settings.PORTAL_LAUNCH_REQUEUE_SECONDS = 5  # > the retries' last gap (4 s), < the stop's age
        assert workloads_requeue_stale() == 0
        # the outage lasts until the launches' create tasks have retried after each delay up
        # to 8 s: no longer, so that their next try (15 s after the first) finds it back
        eventually(lambda: len(create_retries(worker.log(), RETRIES_LOGGED[-1])) >= len(during),
                   timeout=20, message="the create tasks retrying")
        assert Workload.objects.filter(pk__in=during, state__in=[
            State.SUBMITTED, State.CREATING]).count() == len(during)
    finally:
        fault_cluster.start()  # the same port and state file

    kube = Kube()
    eventually(lambda: not disagreements(expected, kube),
               timeout=getattr(fault_cluster, "converge_seconds", CONVERGE_SECONDS),
               message=lambda: f"states matching the cluster: {disagreements(expected, kube)}")
    problems = launch_problems(set(expected), kube)
    assert not problems, problems
    assert set(cluster_objects(kube)) == set(expected) - {to_stop}

    # the create tasks retried with growing delays, a few times each, not in a tight loop
    delays = create_retries(worker.log())
    assert set(RETRIES_LOGGED) <= set(delays), delays
    attempts = Workload.objects.filter(pk__in=during).values_list("launch_attempts", flat=True)
    assert all(2 <= n <= 8 for n in attempts), list(attempts)

    # and the portal says the cluster is back
    eventually(lambda: Client().get("/readyz").status_code == 200, timeout=20,
               message="/readyz ready again")
    assert BANNER not in browser.get("/workloads/").content.decode()
