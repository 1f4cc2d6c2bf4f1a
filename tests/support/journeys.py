"""The API journeys: vision-lab ready to launch, a launch that must be accepted, and the tracker
run until a workload gets where the test expects (tests/workloads, tests/realcluster)."""

from __future__ import annotations

import pytest

from kube.client import Kube
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import Workload
from workloads.tracking.tracker import Tracker


@pytest.fixture
def researcher(api_headers):
    return api_headers("researcher")


def launched(headers, body) -> int:
    response = launch(headers, body)
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def track_until(workload_id: int, predicate, timeout: float = 40.0,
                cluster: str | None = None) -> Workload:
    """Run the tracker (of `cluster`, by name; default the home cluster's) until the workload
    satisfies `predicate`; bounded (loosely: a real Job and ReplicaSet controller add their own
    steps to KWOK's half a second)."""
    tracker = Tracker(cluster=cluster) if cluster else Tracker(Kube())

    def tracked() -> Workload | None:
        tracker.run_for(1.0)  # a run waits for changes: no pause
        workload = Workload.objects.get(pk=workload_id)
        return workload if predicate(workload) else None

    def stayed() -> str:
        workload = Workload.objects.get(pk=workload_id)
        return f"workload {workload_id} stayed {workload.state}: {workload.reason}"

    return eventually(tracked, timeout=timeout, interval=0, message=stayed)


JUPYTER = {"name": "My notebook", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def vision(login, gpu_types, cluster):
    """vision-lab with the demo quota and its namespace provisioned."""
    return vision_lab_ready(login)
