"""The tracker on a worker cluster (workloads/tracking/tracker.py): the pods and events of the
work dispatched there, watched through the worker's API by reflectors of their own, filed
under the same workloads, watched again at every start, its requests counted per cluster.
The session's kubesim is the home cluster, a second one (east) the worker."""

from __future__ import annotations

import uuid

import pytest

from clusters.models import Cluster
from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID, MANAGED_BY
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.waiting import eventually
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
        assert {"Pod@east", "Event@east"} <= set(tracker.reflectors)
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
