"""Queue place and estimate of work waiting for the worker `east`, on two real control planes
(tests/fixtures/multicluster.py): a batch job dispatched to east waits in the home cluster's
queue pinned to east, a notebook placed on east in east's own queue; each one's place is asked
of the cluster that queues it, and its estimate is played on east's GPUs and what runs there
(the API's fields, the pages' text)."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.support.multicluster import EAST, job, state
from tests.support.tracking import track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, post
from workloads.api.serializers import WorkloadSerializer
from workloads.models import Workload
from workloads.queue import annotate_queue
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State


def placed(workload_id: int) -> dict:
    """The API's queue fields once Kueue lists the workload (asked afresh each time)."""
    cache.clear()
    data = WorkloadSerializer(Workload.objects.get(pk=workload_id)).data
    return data if data["queue_position"] is not None else {}


def test_work_waiting_for_the_worker_is_placed_and_estimated_from_it(portal, api_headers):
    headers = api_headers("researcher")
    tracker = Tracker()
    # east's sixteen H100s (and the project's quota of them) taken by two eight-GPU jobs
    holders = []
    for name in ("hold-a", "hold-b"):
        answer = launch(headers, job(name, run_seconds=600, gpu_count=8, cluster=EAST,
                                     max_runtime_minutes=30))
        assert answer.status_code == 201, answer.json()
        holders.append(answer.json()["id"])
    track_until(tracker, lambda: all(state(pk) == S.RUNNING for pk in holders), timeout=90,
                describe=lambda: str([state(pk) for pk in holders]))
    try:
        batch = launch(headers, job("waits", run_seconds=5, cluster=EAST))
        assert batch.status_code == 201, batch.json()
        notebook = launch(headers, {"name": "nb waits", "template": "jupyter",
                                    "gpu_type": "h100", "gpu_count": 1, "cluster": EAST})
        assert notebook.status_code == 201, notebook.json()
        waiting = [batch.json()["id"], notebook.json()["id"]]
        track_until(tracker, lambda: all(state(pk) == S.QUEUED for pk in waiting),
                    timeout=60, describe=lambda: str([state(pk) for pk in waiting]))
        first_free = min(Workload.objects.get(pk=pk).expires_at for pk in holders)
        shown = {}
        for workload_id in waiting:
            # the job in the home cluster's queue pinned to east, the notebook in east's own
            shown[workload_id] = data = eventually(
                lambda workload_id=workload_id: placed(workload_id), timeout=60,
                message=f"no queue place for {workload_id}")
            assert (data["queue_position"], data["queue_length"]) == (1, 1), data
            # east's GPUs come back when the first holder reaches its limit: both start then
            assert data["eta"] == first_free.isoformat(), data
        # the notebook first (interactive work is admitted before batch): it waits on the
        # holders' limits, and the job then finds a GPU free beside it
        assert shown[notebook.json()["id"]]["eta_basis"] == "from maximum runtimes"
        assert shown[batch.json()["id"]]["eta_basis"] == "GPUs are free now"
        rows = list(Workload.objects.filter(pk__in=waiting))
        annotate_queue(rows)
        assert all(row.queue_text.startswith("queued — position 1 of 1 for h100, about ")
                   for row in rows), [row.queue_text for row in rows]
    finally:
        for workload in Workload.objects.filter(tenant__name="vision-lab",
                                                state__in=[S.RUNNING, S.QUEUED, S.PENDING]):
            post(f"/api/v1/workloads/{workload.pk}/stop/", headers)
