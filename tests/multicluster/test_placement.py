"""Where a batch launch that names no cluster goes, on two real control planes
(tests/fixtures/multicluster.py): a GPU type only the worker `east` has goes to east through
MultiKueue; a type both clusters have goes where there is room for it now, the home cluster
first, and to east (through MultiKueue) while the home cluster's GPUs of the type are taken."""

from __future__ import annotations

import pytest

from cluster.capacity import gpu_capacity
from kube import multikueue
from kube.labels import LABEL_WORKLOAD_ID
from tests.support.multicluster import EAST, gpu_node, job, state
from tests.support.tracking import track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, post
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State
HOME = "main"


def made_on_manager(portal, workload_id: int) -> dict:
    """The manager's Job of the workload (every batch job is made there)."""
    namespace = Workload.objects.get(pk=workload_id).tenant.namespace
    with portal.manager_kube() as manager:
        (made,) = manager.list("Job", namespace,
                               label_selector=f"{LABEL_WORKLOAD_ID}={workload_id}")["items"]
    return made


def node_of(portal, workload_id: int, cluster: str) -> str:
    namespace = Workload.objects.get(pk=workload_id).tenant.namespace

    def bound() -> str:
        with portal.east_kube() if cluster == EAST else portal.manager_kube() as client:
            pods = client.list("Pod", namespace,
                               label_selector=f"{LABEL_WORKLOAD_ID}={workload_id}")["items"]
        assert pods and pods[0]["spec"].get("nodeName"), "no pod bound yet"
        return str(pods[0]["spec"]["nodeName"])

    return eventually(bound, timeout=60, message=f"no pod of {workload_id} on {cluster}")


def test_a_type_only_the_worker_has_goes_there_through_multikueue(portal, api_headers):
    answer = launch(api_headers("researcher"), job("only-east", run_seconds=5))
    assert answer.status_code == 201, answer.json()
    assert answer.json()["cluster"] == EAST  # no cluster named: the home cluster has no H100
    made = made_on_manager(portal, answer.json()["id"])
    # made on the manager, in the queue that dispatches to east, for MultiKueue to carry there
    assert made["spec"]["managedBy"] == multikueue.CONTROLLER
    assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal-east"
    assert node_of(portal, answer.json()["id"], EAST).startswith("east-gpu-h100-")


def test_a_type_both_have_goes_where_there_is_room(portal, api_headers):
    headers = api_headers("researcher")
    tracker = Tracker()
    with gpu_node(portal.manager, "main-gpu-h100", gpus=8) as home_node:
        eventually(lambda: gpu_capacity()["h100"].free == 8, timeout=30,
                   message="the home cluster's read model does not show its H100 node")
        # room at home: it stays there, queued and admitted by the home cluster's own queue
        fill = launch(headers, job("fill", run_seconds=240, gpu_count=7))
        assert fill.status_code == 201, fill.json()
        assert fill.json()["cluster"] == HOME
        assert "managedBy" not in made_on_manager(portal, fill.json()["id"])["spec"]
        assert node_of(portal, fill.json()["id"], HOME) == home_node
        track_until(tracker, lambda: state(fill.json()["id"]) == S.RUNNING, timeout=60,
                    describe=lambda: state(fill.json()["id"]))
        eventually(lambda: gpu_capacity()["h100"].free == 1, timeout=30,
                   message=lambda: f"home's H100 figures: {gpu_capacity()['h100']}")
        # two GPUs: one is free at home, sixteen on east: dispatched there
        wide = launch(headers, job("wide", run_seconds=20, gpu_count=2))
        assert wide.status_code == 201, wide.json()
        assert wide.json()["cluster"] == EAST
        made = made_on_manager(portal, wide.json()["id"])
        assert made["spec"]["managedBy"] == multikueue.CONTROLLER
        assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal-east"
        assert node_of(portal, wide.json()["id"], EAST).startswith("east-gpu-h100-")
        # one GPU: the home cluster has it
        narrow = launch(headers, job("narrow", run_seconds=20))
        assert narrow.status_code == 201, narrow.json()
        assert narrow.json()["cluster"] == HOME
        assert node_of(portal, narrow.json()["id"], HOME) == home_node
        for workload in (fill, wide, narrow):
            assert post(f"/api/v1/workloads/{workload.json()['id']}/stop/",
                        headers).status_code == 202
