"""Kueue's events on a workload's Kueue Workload become its events without naming another
tenant: the preemptor's queue, its path through the cohorts and its uids are left out."""

from __future__ import annotations

import pytest

from tests.support.tracking import launch
from workloads.models import WorkloadEvent
from workloads.tracking.events import EventRecorder

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def test_a_preemption_event_keeps_the_priority_and_drops_the_other_tenants_names(
        tenants, owner, gpu_types):
    tenant = tenants()
    workload = launch(tenant, owner, gpu_types, name="borrower", create=False)
    event = {
        "metadata": {"uid": "e-1", "namespace": tenant.namespace, "name": "ev"},
        "involvedObject": {"kind": "Workload", "namespace": tenant.namespace,
                           "name": f"job-{workload.object_name}-1a2b3"},
        "type": "Normal", "reason": "Preempted", "count": 1,
        "reportingComponent": "kueue-admission",
        "message": "Preempted to accommodate a workload (UID: 6f1c, JobUID: 0d9e) due to "
                   "reclamation within the cohort; preemptor path: /gpu-portal/gp-rival; "
                   f"preemptee path: /gpu-portal/{tenant.namespace}; preemptor effective "
                   "priority: 1000 (base: 1000, boost: 0); preemptee effective priority: 100 "
                   "(base: 100, boost: 0)"}
    assert EventRecorder().record([event]) == 1
    row = WorkloadEvent.objects.get(workload=workload, reason="Preempted")
    assert "gp-rival" not in row.message and "6f1c" not in row.message
    assert "preemptor path" not in row.message
    assert "preemptor effective priority: 1000" in row.message
