"""The portal's batch work dispatched by MultiKueue, on two real control planes
(tests/fixtures/multicluster.py): launched through the portal's API on the manager (the
portal's home cluster), run on the worker `east`, whose H100 nodes are the only ones of the
type; the state from the manager's object, logs, ranks and events through the worker's API;
stop and delete remove the objects in both clusters."""

from __future__ import annotations

import pytest
from django.test import Client

from kube import multikueue
from kube.labels import LABEL_WORKLOAD_ID
from tests.support.multicluster import (
    EAST,
    job,
    jobset,
    running_on_east,
    state,
)
from tests.support.tracking import track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import delete, launch, post
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State
# how long a job runs that is looked at while it runs (its pods, logs, events, page: a second
# or two after it is tracked running) and then waited for until it succeeds
RUN_SECONDS = 10


def objects_of(kube, kind: str, namespace: str, workload_id: int) -> list[dict]:
    return kube.list(kind, namespace, label_selector=f"{LABEL_WORKLOAD_ID}={workload_id}")["items"]


def test_a_job_on_a_type_only_the_worker_has_runs_there_and_succeeds(portal, api_headers):
    headers = api_headers("researcher")
    answer = launch(headers, job("on-east", run_seconds=RUN_SECONDS))
    assert answer.status_code == 201, answer.json()
    # it names no cluster: the home cluster has no H100, the worker does
    assert answer.json()["cluster"] == EAST
    workload = Workload.objects.get(pk=answer.json()["id"])
    namespace = workload.tenant.namespace
    with portal.manager_kube() as manager, portal.east_kube() as east:
        (made,) = objects_of(manager, "Job", namespace, workload.pk)
        assert made["spec"]["managedBy"] == multikueue.CONTROLLER
        assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal-east"
        pods = eventually(lambda: [p for p in objects_of(east, "Pod", namespace, workload.pk)
                                   if p["spec"].get("nodeName")], timeout=60,
                          message="no pod of the job on the worker's nodes")
        assert pods[0]["spec"]["nodeName"].startswith("east-gpu-h100-")
        assert objects_of(manager, "Pod", namespace, workload.pk) == []
        tracker = Tracker()
        track_until(tracker, lambda: state(workload.pk) == S.RUNNING, timeout=60,
                    describe=lambda: state(workload.pk))
        # the pod's logs and events, read through the worker's API
        lines = eventually(lambda: Client().get(f"/api/v1/workloads/{workload.pk}/logs/",
                                                **headers).json()["lines"],
                           timeout=20, message="no log lines through the portal")
        assert lines
        events = Client().get(f"/api/v1/workloads/{workload.pk}/events/", **headers).json()
        assert any(event["reason"] == "Scheduled" and "east-gpu-h100-" in event["message"]
                   for event in events), events
        page = Client().get(f"/api/v1/workloads/{workload.pk}/", **headers).json()
        assert page["cluster"] == EAST and page["state"] == S.RUNNING
        track_until(tracker, lambda: state(workload.pk) == S.SUCCEEDED, timeout=90,
                    describe=lambda: state(workload.pk))
        # the worker's copy goes once the manager's object finished (MultiKueue's clean-up)
        eventually(lambda: not objects_of(east, "Job", namespace, workload.pk), timeout=90,
                   message="the worker's copy of the Job is still there")


def test_a_two_node_jobset_runs_on_the_worker_with_its_ranks_read_through_the_portal(
        portal, api_headers):
    headers = api_headers("researcher")
    answer = launch(headers, jobset("ddp", nodes=2, gpus_per_node=8, run_seconds=RUN_SECONDS,
                                    cluster=EAST))
    assert answer.status_code == 201, answer.json()
    workload_id = answer.json()["id"]
    namespace = Workload.objects.get(pk=workload_id).tenant.namespace
    with portal.manager_kube() as manager, portal.east_kube() as east:
        (made,) = objects_of(manager, "JobSet", namespace, workload_id)
        assert made["spec"]["managedBy"] == multikueue.CONTROLLER

        def two_ranks_on_east() -> list[dict]:
            pods = objects_of(east, "Pod", namespace, workload_id)
            assert len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)
            return pods

        pods = eventually(two_ranks_on_east, timeout=60, message="the ranks are not on east")
        nodes = {p["spec"]["nodeName"] for p in pods}
        assert len(nodes) == 2 and all(n.startswith("east-gpu-h100-") for n in nodes)
        tracker = Tracker()
        track_until(tracker, lambda: running_on_east(workload_id, 2), timeout=60,
                    describe=lambda: str(Workload.objects.values("state", "ranks")
                                         .get(pk=workload_id)))
        for rank in (0, 1):
            lines = eventually(
                lambda rank=rank: Client().get(f"/api/v1/workloads/{workload_id}/logs/"
                                               f"?rank={rank}", **headers).json()["lines"],
                timeout=20, message=f"no log lines of rank {rank}")
            assert lines
        track_until(tracker, lambda: state(workload_id) == S.SUCCEEDED, timeout=90,
                    describe=lambda: state(workload_id))
        eventually(lambda: not objects_of(east, "JobSet", namespace, workload_id), timeout=90,
                   message="the worker's copy of the JobSet is still there")


def test_stop_and_delete_remove_the_objects_in_both_clusters(portal, api_headers):
    headers = api_headers("researcher")
    answer = launch(headers, job("long", run_seconds=600, cluster=EAST))
    assert answer.status_code == 201, answer.json()
    workload_id = answer.json()["id"]
    namespace = Workload.objects.get(pk=workload_id).tenant.namespace
    with portal.manager_kube() as manager, portal.east_kube() as east:
        eventually(lambda: objects_of(east, "Pod", namespace, workload_id), timeout=60,
                   message="no pod of the job on the worker")
        assert objects_of(east, "Job", namespace, workload_id)
        stopped = post(f"/api/v1/workloads/{workload_id}/stop/", headers)
        assert stopped.status_code == 202, stopped.json()
        assert not objects_of(manager, "Job", namespace, workload_id)
        # MultiKueue removes the worker's copy once the manager's is gone: waited for
        eventually(lambda: not objects_of(east, "Job", namespace, workload_id)
                   and not objects_of(east, "Pod", namespace, workload_id), timeout=90,
                   message="the worker's copy of a stopped job is still there")
        track_until(Tracker(), lambda: state(workload_id) == S.STOPPED, timeout=30,
                    describe=lambda: state(workload_id))
        assert delete(f"/api/v1/workloads/{workload_id}/", headers).status_code == 204
        assert not objects_of(east, "Job", namespace, workload_id)


def test_what_lives_on_the_home_cluster_does_not_go_to_the_worker(portal, api_headers):
    """A service runs on the worker itself (tests/multicluster/test_services.py), a job is
    dispatched there: neither takes what lives on the home cluster along."""
    headers = api_headers("researcher")
    service = launch(headers, {**job("svc", run_seconds=5, cluster=EAST, use_home=True),
                               "kind": "service", "port": 8080})
    assert service.status_code == 400
    assert "home folder is on the home cluster" in service.json()["fields"]["cluster"][0]
    with_home = launch(headers, job("home", run_seconds=5, cluster=EAST, use_home=True))
    assert with_home.status_code == 400
    assert "the home volume" in with_home.json()["fields"]["cluster"][0]
