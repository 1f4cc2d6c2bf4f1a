"""The notebook burst benchmark's trace (stack/burst.py `Hops`): when each launch reached each
hop of its way to a running pod, from the objects its watches saw."""

from __future__ import annotations

from stack.burst import KUEUE_GATE, WORKLOAD_LABEL, Hops, hop_spread


def _meta(name: str, workload_id: str | None = None, **more: object) -> dict[str, object]:
    labels = {WORKLOAD_LABEL: workload_id} if workload_id else {}
    return {"name": name, "labels": labels, **more}


def _pod(name: str, workload_id: str | None = None, *, gated: bool = False, node: str = "",
         ip: str = "", ready: bool = False) -> dict[str, object]:
    return {"metadata": _meta(name, workload_id),
            "spec": {"schedulingGates": [{"name": KUEUE_GATE}] if gated else [],
                     "nodeName": node},
            "status": {"podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True"}] if ready else []}}


def test_a_queued_launch_reaches_each_hop_when_its_objects_first_show_it():
    hops = Hops()
    hops.seen("deployments", {"metadata": _meta("wl-7-a", "7")}, 1.0)
    hops.seen("replicasets", {"metadata": _meta("wl-7-a-5d", "7")}, 1.5)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7", gated=True), 2.0)
    workload = {"metadata": _meta("pod-wl-7-a-5d-x", ownerReferences=[
        {"kind": "Pod", "name": "wl-7-a-5d-x"}]), "status": {"conditions": []}}
    hops.seen("workloads", workload, 2.5)
    workload["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True"},
                                         {"type": "Admitted", "status": "False"}]}
    hops.seen("workloads", workload, 3.0)
    workload["status"]["conditions"][1]["status"] = "True"
    hops.seen("workloads", workload, 3.2)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7"), 3.5)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7", node="gpu-a100-1"), 3.6)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7", node="gpu-a100-1", ip="10.244.0.5"), 4.1)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7", node="gpu-a100-1", ip="10.244.0.5",
                           ready=True), 4.6)
    hops.seen("pods", _pod("wl-7-a-5d-x", "7", node="gpu-a100-1", ip="10.244.0.5",
                           ready=True), 9.0)  # a later change moves no hop

    assert hops.by_launch() == {"7": {
        "deployment": 1.0, "replicaset": 1.5, "pod": 2.0, "workload": 2.5, "reserved": 3.0,
        "admitted": 3.2, "ungated": 3.5, "scheduled": 3.6, "address": 4.1, "ready": 4.6}}


def test_a_pod_without_a_workload_label_is_its_own_launch_and_ungated_when_made():
    hops = Hops()
    hops.seen("pods", _pod("jupyter-bench-1-0", node="gpu-a100-2"), 10.0)
    hops.seen("pods", _pod("jupyter-bench-1-0", node="gpu-a100-2", ip="10.244.1.2",
                           ready=True), 11.0)

    assert hops.by_launch() == {"jupyter-bench-1-0": {
        "pod": 10.0, "ungated": 10.0, "scheduled": 10.0, "address": 11.0, "ready": 11.0}}


def test_spread_is_first_median_last_of_the_hops_every_launch_passed():
    by_launch = {"1": {"pod": 10.5, "ready": 12.0}, "2": {"pod": 11.0, "ready": 13.0},
                 "3": {"pod": 11.5}}

    assert hop_spread(by_launch, since=10.0) == {"pod": [0.5, 1.0, 1.5]}
