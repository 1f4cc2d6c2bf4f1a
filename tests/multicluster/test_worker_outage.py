"""A worker cluster taken down under dispatched work, on two real control planes
(tests/fixtures/multicluster.py): the portal's tracker never reads the missing worker as a
failure, the worker takes no new work while it does not answer, nothing is lost when it is
back, and a distributed job launched the moment it is back runs there at once. The worker
comes back as a production cluster does, its leader-elected controllers started afresh
(ControlPlane.resume_apiserver): so the tests that follow, in any order, find it whole."""

from __future__ import annotations

import time

import pytest

from clusters.models import Cluster
from clusters.services import cluster_probe_one
from tests.support.multicluster import (
    EAST,
    controllers_of,
    dispatch_state,
    job,
    jobset,
    running_on_east,
    state,
    worker_back,
)
from tests.support.tracking import track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster]

S = Workload.State
# how long the worker is taken down: past the renew deadline (10 s) of its leader-elected
# controllers' leases, which a production cluster's then restart (as resume_apiserver does)
OUTAGE_SECONDS = 15
TRACKER_RUN_SECONDS = 2.5  # the tracker's runs through the outage: six of them
# the job runs through the outage and the worker's return (its API server and controllers
# started again, MultiKueue connected again: some 20 s under load) and finishes after it
RUN_SECONDS = OUTAGE_SECONDS + 30


@pytest.mark.timeout(600)
def test_a_worker_down_under_a_running_job_fails_nothing_and_loses_nothing(portal, api_headers):
    """The worker's API server stopped for 15 s under a running job: the tracker goes on all
    along and never reads the missing worker as a failure, the worker is refused new work
    while its probe finds it unreachable, and once it is back the job finishes there."""
    headers = api_headers("researcher")
    answer = launch(headers, job("through", run_seconds=RUN_SECONDS, cluster=EAST))
    assert answer.status_code == 201, answer.json()
    workload_id = answer.json()["id"]
    tracker = Tracker()
    track_until(tracker, lambda: state(workload_id) == S.RUNNING, timeout=60,
                describe=lambda: state(workload_id))
    east = Cluster.objects.get(name=EAST)
    before = controllers_of(portal.east)
    portal.east.stop_component("kube-apiserver")
    try:
        back_at = time.monotonic() + OUTAGE_SECONDS
        seen = set()
        while (left := back_at - time.monotonic()) > 0:
            tracker.run_for(min(left, TRACKER_RUN_SECONDS))  # its cycles through the outage
            seen.add(state(workload_id))
        assert seen == {S.RUNNING}, seen  # never failed, never anything else
        probed = cluster_probe_one(cluster_id=east.pk)
        assert probed is not None and probed.state == Cluster.State.UNREACHABLE
        refused = launch(headers, job("meanwhile", run_seconds=5, cluster=EAST))
        assert refused.status_code == 409 and refused.json()["code"] == "cluster_unavailable"
    finally:
        worker_back(portal.manager, portal.east)
    # back as a production cluster's are after an outage past their lease: started afresh
    # (their watches anew, none in a reconnect back-off), Kueue's webhook where it was (its
    # CRDs unchanged: a new conversion address closes every watch on its kinds)
    after = controllers_of(portal.east)
    assert all(after[name] != before[name] for name in
               ("kube-scheduler", "kube-controller-manager", "kueue", "jobset")), (before, after)
    assert after["conversion"] == before["conversion"]
    eventually(lambda: cluster_probe_one(cluster_id=east.pk).state == Cluster.State.READY,
               timeout=60, message="east does not answer again")
    # at once, a JobSet: the worker's Kueue admits it and lets its JobSet controller make its
    # Jobs (a Kueue whose watches were still in their back-off refused them for ~90 s)
    ranks = launch(headers, jobset("after", nodes=2, gpus_per_node=1, run_seconds=30,
                                   cluster=EAST))
    assert ranks.status_code == 201, ranks.json()
    track_until(tracker, lambda: running_on_east(ranks.json()["id"], 2), timeout=60,
                describe=lambda: dispatch_state(portal.manager, ranks.json()["id"]))
    track_until(tracker, lambda: state(workload_id) == S.SUCCEEDED, timeout=240,
                describe=lambda: state(workload_id))
