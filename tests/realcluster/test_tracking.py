"""Lifecycle tracking on the real API server: the kubesim suite's tests (tests/workloads/
test_tracking.py) against real list + watch, events, quota refusals and scheduler messages, plus
a real 410 Expired after etcd compaction."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from kube.client import Kube
from tests.support.tracking import launch, owner, state_of, tenants, track_until  # noqa: F401
from tests.support.waiting import eventually
from tests.workloads.test_tracking import (  # noqa: F401 - collected here, against the real cluster
    test_a_stopping_workload_whose_objects_are_gone_is_stopped,
    test_orphans_are_deleted,
    test_quota_refusals_name_the_quota,
    test_requests_per_cycle_do_not_grow_with_workloads,
    test_states_reasons_and_events_end_to_end,
    test_the_command_leads_under_the_lease_and_a_standby_takes_over,
    test_vanished_workloads_fail_but_new_ones_do_not,
)
from workloads.models import TrackerCursor, Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]
S = Workload.State


def test_relist_after_a_real_410(tenants, owner, gpu_types, real_cluster):
    """etcd compacts past the tracker's stored resourceVersions and the API server restarts (its
    watch cache starts again from now): every watch from a stored version answers 410 Expired;
    the tracker relists, catches up with the workload that started meanwhile, and carries on.
    (The pod is Running before the restart and finishes well after it: KWOK does not retry a
    stage whose status patch met the API server down.)"""
    tenant = tenants()
    tracker = Tracker(Kube())
    tracker.run_for(0.5)  # lists; stopped, its stores and stored cursors stay where they were
    listed = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
    workload = launch(tenant, owner, gpu_types, name="after", env={"KUBESIM_RUN_SECONDS": "20"})
    core = k8s.CoreV1Api(real_cluster.api_client())
    selector = f"gpu-portal.io/workload-id={workload.pk}"
    eventually(lambda: any(p.status.phase == "Running" for p in core.list_namespaced_pod(
                   tenant.namespace, label_selector=selector).items),
               timeout=30, interval=0.2, message="the Job's pod never ran")
    real_cluster.restart_apiserver(compact=True)
    stats = tracker.run_for(1.5)  # resumes from the stored cursors
    assert stats.expired == 7 and stats.lists == 7, stats  # every watched kind
    # caught up: Running, or already Succeeded where the restart took most of the pod's 20 s
    # (on a loaded machine); never Failed as vanished
    caught_up = (S.RUNNING, S.SUCCEEDED)
    track_until(tracker, lambda: state_of(workload).state in caught_up, timeout=30,
                describe=lambda: _state_text(workload))
    track_until(tracker, lambda: state_of(workload).state == S.SUCCEEDED, timeout=60,
                describe=lambda: _state_text(workload))
    now = dict(TrackerCursor.objects.values_list("resource", "resource_version"))
    assert int(now["pods"]) > int(listed["pods"])


def _state_text(workload: Workload) -> str:
    row = state_of(workload)
    return f"the workload is {row.state}: {row.reason!r}"
