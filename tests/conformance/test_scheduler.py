"""The scheduler's verdicts on the demo inventory (2× A100, 2× V100, 1× T4 tainted GPU nodes,
2 CPU nodes): the PodScheduled condition, FailedScheduling and Scheduled events."""

from __future__ import annotations

import re

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, condition, events_for, eventually

NOT_HELPFUL = "preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling."


def unschedulable(cluster: Cluster, ns: str, name: str) -> dict:
    def check() -> dict | None:
        pod = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}").json()
        cond = condition(pod, "PodScheduled")
        return cond if cond and cond.get("reason") == "Unschedulable" else None

    return eventually(check, what=f"pod {name} Unschedulable")


def failed_scheduling(cluster: Cluster, ns: str, name: str) -> dict:
    return eventually(lambda: next((e for e in events_for(cluster, ns, name)
                                    if e["reason"] == "FailedScheduling"), None),
                      what=f"FailedScheduling event for {name}")


def test_too_many_gpus(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("big", m.pod_spec(m.container(gpus=9),
                                                                   tolerate_gpu=True)))
    cond = unschedulable(cluster, ns, "big")
    assert cond["status"] == "False"
    assert cond["message"] == ("0/9 nodes are available: 9 Insufficient nvidia.com/gpu. "
                               + NOT_HELPFUL)


def test_node_selector_matching_nothing(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("lost", m.pod_spec(
        tolerate_gpu=True, node_selector={"gputype": "b200"})))
    assert unschedulable(cluster, ns, "lost")["message"] == (
        "0/9 nodes are available: 9 node(s) didn't match Pod's node affinity/selector. "
        + NOT_HELPFUL)


def test_untolerated_taint(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("shy", m.pod_spec(
        m.container(gpus=1), node_selector={"gputype": "a100"})))
    assert unschedulable(cluster, ns, "shy")["message"] == (
        "0/9 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "7 node(s) had untolerated taint(s). " + NOT_HELPFUL)


def test_failed_scheduling_event(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("big", m.pod_spec(m.container(gpus=9),
                                                                   tolerate_gpu=True)))
    message = unschedulable(cluster, ns, "big")["message"]
    event = failed_scheduling(cluster, ns, "big")
    assert (event["type"], event["message"]) == ("Warning", message)
    assert "default-scheduler" in (event.get("reportingComponent"),
                                   (event.get("source") or {}).get("component"))
    involved = event["involvedObject"]
    assert (involved["kind"], involved["name"], involved["namespace"]) == ("Pod", "big", ns)


def test_scheduled_pod_lands_on_a_matching_gpu_node(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("fit", m.pod_spec(
        m.container(gpus=1), tolerate_gpu=True, node_selector={"gputype": "v100"})))
    pod = eventually(lambda: (p := cluster.core.read_namespaced_pod("fit", ns)).spec.node_name
                     and p, what="pod bound")
    assert re.fullmatch(r"gpu-v100-[12]", pod.spec.node_name)
    cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert cond.status == "True" and cond.reason is None
    event = eventually(lambda: next((e for e in events_for(cluster, ns, "fit")
                                     if e["reason"] == "Scheduled"), None),
                       what="Scheduled event")
    assert event["type"] == "Normal"
    assert event["message"] == f"Successfully assigned {ns}/fit to {pod.spec.node_name}"


def test_pending_pod_starts_when_gpus_free_up(cluster: Cluster, ns: str):
    t4 = {"gputype": "t4"}
    cluster.core.create_namespaced_pod(ns, m.pod("hog", m.pod_spec(
        m.container(gpus=4), tolerate_gpu=True, node_selector=t4)))
    eventually(lambda: cluster.core.read_namespaced_pod("hog", ns).spec.node_name,
               what="hog bound")
    cluster.core.create_namespaced_pod(ns, m.pod("next", m.pod_spec(
        m.container(gpus=1), tolerate_gpu=True, node_selector=t4)))
    assert unschedulable(cluster, ns, "next")["message"] == (
        "0/9 nodes are available: 1 Insufficient nvidia.com/gpu, 8 node(s) didn't match "
        "Pod's node affinity/selector. preemption: 0/9 nodes are available: 1 No preemption "
        "victims found for incoming pod, 8 Preemption is not helpful for scheduling.")
    cluster.core.delete_namespaced_pod("hog", ns, grace_period_seconds=0)
    pod = eventually(lambda: (p := cluster.core.read_namespaced_pod("next", ns)).spec.node_name
                     and p, what="next bound after hog left", timeout=40)
    assert pod.spec.node_name == "gpu-t4-1"
