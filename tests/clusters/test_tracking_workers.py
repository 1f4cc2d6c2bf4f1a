"""The trackers of the worker clusters (workloads/tracking/tracker.py): the home tracker runs
one per worker (its peers), which watches the worker's pods and events and passes them on; the
pods of work dispatched there are filed under the same workloads and read by the home tracker,
at every start; the peer watches no Jobs (a dispatched job's copy is MultiKueue's), and judges
no batch workload; requests counted per cluster. The session's kubesim is the home cluster, a
second one (east) the worker."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from clusters.models import Cluster
from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID, MANAGED_BY
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.pages import make_workload
from tests.support.waiting import eventually
from workloads.objects import workload_kube
from workloads.tracking.states import live_of_kind, tracking_cluster, workload_rows
from workloads.tracking.tracker import Tracker

pytestmark = pytest.mark.django_db


def labelled_pod(name: str, namespace: str, workload_id: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {**MANAGED_BY, LABEL_WORKLOAD_ID: str(workload_id)}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "app", "image": "busybox:1.36"}]}}


def test_a_workers_pods_are_filed_under_their_workload_at_every_start(cluster, east):
    Cluster.objects.create(name="east", kubeconfig_path=east.kubeconfig)
    namespace = f"wk-{uuid.uuid4().hex[:8]}"
    workload_id = 900_000 + int(uuid.uuid4().int % 1000)
    with cluster_objects_of_the_test(east.api_client, timeout=30), east.api_client() as client:
        worker = Kube(client)
        worker.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        worker.create(labelled_pod(f"wl-{workload_id}-a", namespace, workload_id))
        tracker = Tracker()
        tracker.run_for(1.0)
        # one watch per kind and cluster: the worker's tracker, no Jobs of its own
        peer = tracker.peers["east"]
        assert {"Pod", "Event", "Deployment"} <= set(peer.reflectors)
        assert "Job" not in peer.reflectors and not any("@" in k for k in tracker.reflectors)
        assert [p["metadata"]["name"] for p in tracker.observed(
            workload_id, "batch", namespace).pods] == [f"wl-{workload_id}-a"]
        # a pod made while it was stopped is seen at its next start: watched again there
        worker.create(labelled_pod(f"wl-{workload_id}-b", namespace, workload_id))

        def both() -> bool:
            tracker.run_for(0.5)
            return len(tracker.observed(workload_id, "batch", namespace).pods) == 2

        eventually(both, timeout=20, interval=0, message="the second pod was not seen")
        counts = tracker.stats_by_cluster()
        assert set(counts) == {"main", "east"} and counts["east"] > 0


def test_batch_work_on_a_worker_is_the_home_trackers_and_services_their_clusters(vision_lab):
    Cluster.objects.create(name="east", kubeconfig_path="/nonexistent/east")
    job = make_workload(vision_lab, "researcher", name="train", kind="batch", cluster="east")
    notebook = make_workload(vision_lab, "researcher", name="nb", cluster="east")
    rows = workload_rows([job.pk, notebook.pk])
    assert tracking_cluster(rows[job.pk]) == "main"  # dispatched from home: judged there
    assert tracking_cluster(rows[notebook.pk]) == "east"
    assert workload_kube(job).cluster is None and workload_kube(notebook).cluster == "east"
    # after a list of Jobs, the worker's tracker has no batch workload to find vanished; the
    # home one has the dispatched job's (the manager's Job is its object)
    later = timezone.now() + dt.timedelta(days=1)
    assert list(live_of_kind("Job", later, "east")) == []
    assert [wid for wid, _ in live_of_kind("Job", later, "main")] == [job.pk]
    assert [wid for wid, _ in live_of_kind("Deployment", later, "east")] == [notebook.pk]
