"""The order of a queue where Kueue's visibility API is not served (workloads/queue.py)."""

from __future__ import annotations

from workloads.queue import _matches, owner_name, pending_order


def workload(name: str, created: str, priority: int = 100, **conditions: str) -> dict:
    return {"metadata": {"name": f"job-{name}-abcde", "creationTimestamp": created,
                         "ownerReferences": [{"kind": "Job", "name": name}]},
            "spec": {"priority": priority},
            "status": {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}
                                      for kind, at in conditions.items()]}}


def test_waiting_workloads_by_priority_then_age_and_preempted_ones_from_their_eviction():
    items = [
        workload("wl-1-old", "2026-11-23T10:00:00Z"),
        workload("wl-2-admitted", "2026-11-23T09:00:00Z", QuotaReserved="2026-11-23T09:00:01Z"),
        workload("wl-3-done", "2026-11-23T08:00:00Z", Finished="2026-11-23T08:30:00Z"),
        workload("wl-4-service", "2026-11-23T11:00:00Z", priority=1000),
        # admitted at 09:30, preempted at 10:30: it waits from 10:30
        workload("wl-5-preempted", "2026-11-23T09:30:00Z", Evicted="2026-11-23T10:30:00Z"),
        workload("wl-6-new", "2026-11-23T10:15:00Z"),
    ]
    assert [owner_name(w) for w in pending_order(items)] == [
        "wl-4-service", "wl-1-old", "wl-6-new", "wl-5-preempted"]
    # launched in the same second: in the portal's order (wl-9 before wl-10)
    same = [workload("wl-10-b", "2026-11-23T12:00:00Z"), workload("wl-9-a", "2026-11-23T12:00:00Z")]
    assert [owner_name(w) for w in pending_order(same)] == ["wl-9-a", "wl-10-b"]


def test_a_pending_workload_is_matched_to_its_job_or_its_deployments_pod():
    assert _matches("wl-7-train", "wl-7-train")
    assert _matches("wl-8-notebook", "wl-8-notebook-5d8f7c9b6-x2k4q")
    assert not _matches("wl-7-train", "wl-70-train")
