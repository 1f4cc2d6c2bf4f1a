"""The tracker and distributed workloads where the cluster does not serve JobSet or the MPI
operator (kubesim): it asks once, only when such a workload exists, counts what it asked, and
never judges a group by the Job list (a group has no Job of ours). The groups themselves are
tracked on the real control plane (tests/distributed/)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from kube.client import Kube
from tests.support.cluster import remove_workload_objects
from tests.support.tracking import counting_kube, launch, state_of
from workloads.models import Workload
from workloads.tracking.index import workload_id_of
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State


def distributed(tenant, owner, gpu_types, *, engine: str) -> Workload:
    """A live distributed workload whose group the cluster never had (the tracker must not
    fail it as vanished by a Job list)."""
    workload = launch(tenant, owner, gpu_types, name=f"group-{engine}", create=False,
                      nodes=2, launch_spec={"engine": engine})
    Workload.objects.filter(pk=workload.pk).update(
        state=S.PENDING, updated_at=timezone.now() - dt.timedelta(minutes=2))
    return workload


def test_without_distributed_workloads_no_discovery_request(tenants, cluster):
    tenants()
    # the session's kubesim is shared: an earlier test's group pods, deleted as it ended, may
    # still be terminating, and the tracker's first list would see them (a CI run did)
    remove_workload_objects(Kube(), wait=30)
    kube, calls = counting_kube(cluster)
    stats = Tracker(kube).run_for(1.0)
    assert stats.requests == len(calls)
    # the seven kinds it always follows (six of workloads, the volumes' claims), listed and
    # watched (a watch the server ends early is opened again: how many times depends on the
    # machine's load), and nothing else: no discovery, no JobSet or MPIJob
    assert {path for _, path in calls} == {
        "api/v1/pods", "apis/batch/v1/jobs", "apis/apps/v1/deployments", "api/v1/services",
        "apis/networking.k8s.io/v1/ingresses", "api/v1/events", "api/v1/persistentvolumeclaims"}
    assert len(calls) >= 14


def test_a_cluster_without_the_engines_is_asked_once_and_a_group_is_not_judged_by_jobs(
        tenants, owner, gpu_types, cluster):
    tenant = tenants()
    group = distributed(tenant, owner, gpu_types, engine="jobset")
    lost = launch(tenant, owner, gpu_types, name="lost", create=False)
    Workload.objects.filter(pk=lost.pk).update(
        state=S.PENDING, updated_at=timezone.now() - dt.timedelta(minutes=2))
    kube, calls = counting_kube(cluster)
    tracker = Tracker(kube)
    stats = tracker.run_for(1.0)
    asked = [path for _, path in calls if "jobset" in path or "kubeflow" in path]
    assert asked == ["apis/jobset.x-k8s.io/v1alpha2", "apis/kubeflow.org/v2beta1"]
    assert stats.requests == len(calls) == 16  # the two questions, 7 lists, 7 watches
    assert set(tracker.reflectors) == {"Pod", "Job", "Deployment", "Service", "Ingress",
                                       "Event", "PersistentVolumeClaim"}
    # the Job list failed the batch workload without its Job, not the group
    assert (state_of(lost).state, state_of(group).state) == (S.FAILED, S.PENDING)
    calls.clear()
    assert tracker.run_for(0.5).requests == len(calls) == 7  # resumed: watches, no question


@pytest.mark.parametrize(("name", "wid"), [
    ("jobset-wl-42-ddp-5f1e2", 42), ("mpijob-wl-7-allreduce-0c9d1", 7),
    ("job-wl-3-train-1a2b3", 3), ("jobset-other-1a2b3", None)])
def test_kueue_workload_events_of_groups_map_to_the_workload(name, wid):
    event = {"involvedObject": {"kind": "Workload", "name": name}, "reason": "Pending"}
    assert workload_id_of(event) == wid
