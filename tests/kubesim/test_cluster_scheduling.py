"""The scheduler over HTTP: FailedScheduling in the real wording, retries when capacity frees,
taints, nodeSelector and node affinity, cordoned nodes, MIG resources, GPU assignment.

A kubesim of its own (demo inventory) so that node counts and free GPUs are exactly known."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.cluster_helpers import (
    DEMO_INVENTORY,
    MIG_INVENTORY,
    condition,
    container,
    events_for,
    job,
    pod,
    pod_spec,
    write_inventory,
)
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def demo(kubesim_factory):
    return kubesim_factory(inventory=DEMO_INVENTORY)


@pytest.fixture(scope="module")
def core(demo):
    with demo.api_client() as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def ns(core):
    name = f"s-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
    # Deleted pods free their GPUs for the next test at once.
    eventually(lambda: not core.list_namespaced_pod(name).items,
               message="waiting for namespace emptied", ignoring=(ApiException,))


def unschedulable(core, ns: str, name: str) -> str:
    def check():
        p = core.read_namespaced_pod(name, ns)
        cond = condition(p, "PodScheduled")
        return cond if cond and cond.status == "False" else None

    cond = eventually(check, message=f"waiting for {name} unschedulable", ignoring=(ApiException,))
    assert cond.reason == "Unschedulable"
    events = [e for e in events_for(core, ns, name) if e.reason == "FailedScheduling"]
    assert len(events) == 1
    assert events[0].type == "Warning" and events[0].source.component == "default-scheduler"
    assert events[0].message == cond.message
    return cond.message


def scheduled_node(core, ns: str, name: str) -> str:
    return eventually(lambda: core.read_namespaced_pod(name, ns).spec.node_name,
                      message=f"waiting for {name} scheduled", ignoring=(ApiException,))


def test_too_big_for_any_node(core, ns):
    core.create_namespaced_pod(ns, pod("huge", pod_spec(container(gpus=9), tolerate_gpu=True)))
    # more than any node has at all: no eviction could help (kube-scheduler's NodeResourcesFit
    # marks it unresolvable), as the real control plane answers (tests/conformance)
    assert unschedulable(core, ns, "huge") == (
        "0/9 nodes are available: 9 Insufficient nvidia.com/gpu. preemption: 0/9 nodes are "
        "available: 9 Preemption is not helpful for scheduling.")  # the shared nodes have none


def test_untolerated_gpu_taint(core, ns):
    # kubesim reports Kubernetes 1.35+, whose scheduler no longer names the taint.
    core.create_namespaced_pod(ns, pod("gpu", pod_spec(container(gpus=1))))
    assert unschedulable(core, ns, "gpu") == (
        "0/9 nodes are available: 2 Insufficient nvidia.com/gpu, 7 node(s) had untolerated "
        "taint(s). preemption: 0/9 nodes are available: 9 Preemption is not helpful for "
        "scheduling.")  # the CPU nodes have no GPU at all: unresolvable


def test_node_selector_and_insufficient_gpus(core, ns):
    core.create_namespaced_pod(ns, pod("a", pod_spec(container(gpus=9), tolerate_gpu=True,
                                                     node_selector={"gputype": "a100"})))
    assert unschedulable(core, ns, "a") == (
        "0/9 nodes are available: 2 Insufficient nvidia.com/gpu, 7 node(s) didn't match Pod's "
        "node affinity/selector. preemption: 0/9 nodes are available: 9 Preemption is not "
        "helpful for scheduling.")  # 9 GPUs > an A100 node's 8: unresolvable
    core.create_namespaced_pod(ns, pod("v", pod_spec(container(gpus=2), tolerate_gpu=True,
                                                     node_selector={"gputype": "v100"})))
    assert scheduled_node(core, ns, "v").startswith("gpu-v100-")
    events = [(e.reason, e.message) for e in events_for(core, ns, "v")]
    node = core.read_namespaced_pod("v", ns).spec.node_name
    assert ("Scheduled", f"Successfully assigned {ns}/v to {node}") in events


@pytest.mark.parametrize(("expression", "tolerate", "expected"), [
    ({"key": "gputype", "operator": "In", "values": ["t4"]}, True, "gpu-t4-1"),
    ({"key": "gputype", "operator": "NotIn", "values": ["a100", "v100"]}, False, "cpu-"),
    ({"key": "gputype", "operator": "DoesNotExist"}, True, "cpu-"),
    ({"key": "nvidia.com/gpu.family", "operator": "Exists"}, True, "gpu-"),
])
def test_required_node_affinity(core, ns, expression, tolerate, expected):
    spec = pod_spec(container(), tolerate_gpu=tolerate, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}})
    core.create_namespaced_pod(ns, pod("aff", spec))
    assert scheduled_node(core, ns, "aff").startswith(expected)


def test_cordoned_nodes_and_retry_on_uncordon(core, ns):
    try:
        for node in ("cpu-1", "cpu-2"):
            core.patch_node(node, {"spec": {"unschedulable": True}})
        core.create_namespaced_pod(ns, pod("c", pod_spec(container())))
        assert unschedulable(core, ns, "c") == (
            "0/9 nodes are available: 2 node(s) were unschedulable, 7 node(s) had untolerated "
            "taint(s). preemption: 0/9 nodes are available: 9 Preemption is not "
            "helpful for scheduling.")
    finally:
        for node in ("cpu-1", "cpu-2"):
            core.patch_node(node, {"spec": {"unschedulable": None}})
    assert scheduled_node(core, ns, "c").startswith("cpu-")


def test_retried_when_capacity_frees(core, ns, demo):
    t4 = {"gputype": "t4"}
    batch = client.BatchV1Api(core.api_client)
    batch.create_namespaced_job(ns, job("hog", pod_spec(container(gpus=4), tolerate_gpu=True,
                                                        node_selector=t4),
                                        annotations={"kubesim.io/run-seconds": "1.0"}))
    eventually(lambda: any(p.spec.node_name for p in core.list_namespaced_pod(ns).items),
               message="waiting for the hog scheduled", ignoring=(ApiException,))
    core.create_namespaced_pod(ns, pod("waiter", pod_spec(container(gpus=1), tolerate_gpu=True,
                                                          node_selector=t4)))
    assert unschedulable(core, ns, "waiter") == (
        "0/9 nodes are available: 1 Insufficient nvidia.com/gpu, 8 node(s) didn't match Pod's "
        "node affinity/selector. preemption: 0/9 nodes are available: 1 No preemption victims "
        "found for incoming pod, 8 Preemption is not helpful for scheduling.")
    # An unrelated change must not repeat the event (the answer is the same).
    core.patch_node("cpu-1", {"metadata": {"labels": {"touched": "yes"}}})
    # The hog's job completes: its GPUs free and the waiter is scheduled.
    assert scheduled_node(core, ns, "waiter") == "gpu-t4-1"
    failed = [e for e in events_for(core, ns, "waiter") if e.reason == "FailedScheduling"]
    assert len(failed) == 1 and failed[0].count == 1
    cond = condition(core.read_namespaced_pod("waiter", ns), "PodScheduled")
    assert cond.status == "True"
    eventually(lambda: core.read_namespaced_pod("waiter", ns).status.phase == "Running",
               message="waiting for waiter running", ignoring=(ApiException,))
    gpus = _get(demo, "/kubesim/v1/gpus/gpu-t4-1")["items"]
    held = [g for g in gpus if g["holder"]]
    assert len(held) == 1 and held[0]["holder"] == {"namespace": ns, "pod": "waiter",
                                                    "container": "app", "trace": "busy"}


def test_gpus_are_assigned_exclusively(core, ns, demo):
    for name in ("left", "right"):
        core.create_namespaced_pod(ns, pod(name, pod_spec(
            container(gpus=4), tolerate_gpu=True, node_selector={"kubernetes.io/hostname": "gpu-a100-2"})))
    for name in ("left", "right"):
        eventually(lambda n=name: core.read_namespaced_pod(n, ns).status.phase == "Running",
                   message=f"waiting for {name} running", ignoring=(ApiException,))
    gpus = _get(demo, "/kubesim/v1/gpus/gpu-a100-2")["items"]
    holders = sorted((g["index"], g["holder"]["pod"]) for g in gpus if g["holder"])
    assert holders == [(0, "left"), (1, "left"), (2, "left"), (3, "left"),
                       (4, "right"), (5, "right"), (6, "right"), (7, "right")] or holders == [
        (0, "right"), (1, "right"), (2, "right"), (3, "right"),
        (4, "left"), (5, "left"), (6, "left"), (7, "left")]


def test_too_many_pods(kubesim_factory, tmp_path):
    inventory = write_inventory(tmp_path / "tiny.yaml", {
        "nodePools": [{"name": "small", "count": 1, "namePrefix": "small-", "pods": 2}]})
    server = kubesim_factory(inventory=inventory)
    with server.api_client() as api:
        core = client.CoreV1Api(api)
        for i in range(3):
            core.create_namespaced_pod("default", pod(f"p{i}", pod_spec(container())))
        for i in range(2):
            scheduled_node(core, "default", f"p{i}")
        assert unschedulable(core, "default", "p2") == (
            "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod.")


def test_mig_resources(kubesim_factory):
    server = kubesim_factory(inventory=MIG_INVENTORY)
    with server.api_client() as api:
        core = client.CoreV1Api(api)
        node = core.read_node("gpu-a100-mig-1")
        assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "7"
        assert node.status.allocatable["nvidia.com/mig-3g.40gb"] == "1"
        assert node.status.allocatable["nvidia.com/mig-2g.20gb"] == "2"
        assert "nvidia.com/gpu" not in node.status.allocatable
        assert node.metadata.labels["nvidia.com/mig.strategy"] == "mixed"
        assert node.metadata.labels["nvidia.com/mig-1g.10gb.count"] == "7"
        core.create_namespaced_pod("default", pod("slice", pod_spec(
            container(gpus=2, resource="nvidia.com/mig-1g.10gb"), tolerate_gpu=True)))
        assert scheduled_node(core, "default", "slice") == "gpu-a100-mig-1"
        core.create_namespaced_pod("default", pod("big", pod_spec(
            container(gpus=2, resource="nvidia.com/mig-3g.40gb"), tolerate_gpu=True)))
        assert unschedulable(core, "default", "big") == (
            "0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb. preemption: 0/3 "
            "nodes are available: 3 Preemption is not helpful for scheduling.")  # 2 > 1 slice
        eventually(lambda: core.read_namespaced_pod("slice", "default").status.phase == "Running",
                   message="waiting for MIG pod running", ignoring=(ApiException,))
        held = [g for g in _get(server, "/kubesim/v1/gpus/gpu-a100-mig-1")["items"]
                if g["holder"]]
        assert len(held) == 2
        assert all(g["deviceId"].startswith("MIG-") and g["migProfile"] == "1g.10gb"
                   for g in held)


def test_time_sliced_replicas_are_scheduled_by_name(core, ns, demo):
    # the demo's time-sliced T4 node: 16 units of nvidia.com/gpu.shared, handed out as replicas
    # of its 4 GPUs; a pod asking for more units than are left waits like any other
    shared = {"gputype": "t4-shared"}
    for name, units in (("a", 15), ("b", 1)):
        core.create_namespaced_pod(ns, pod(name, pod_spec(
            container(gpus=units, resource="nvidia.com/gpu.shared"), tolerate_gpu=True,
            node_selector=shared)))
        assert scheduled_node(core, ns, name) == "gpu-t4-shared-1"
    core.create_namespaced_pod(ns, pod("c", pod_spec(
        container(gpus=1, resource="nvidia.com/gpu.shared"), tolerate_gpu=True,
        node_selector=shared)))
    assert unschedulable(core, ns, "c").startswith(
        "0/9 nodes are available: 1 Insufficient nvidia.com/gpu.shared, 8 node(s) didn't match ")
    eventually(lambda: core.read_namespaced_pod("b", ns).status.phase == "Running",
               message="waiting for the replica's pod running", ignoring=(ApiException,))
    held = [g for g in _get(demo, "/kubesim/v1/gpus/gpu-t4-shared-1")["items"]
            if g["holder"] and g["holder"]["pod"] == "b"]
    assert len(held) == 1 and held[0]["deviceId"].startswith("GPU-")
    assert held[0]["deviceId"].endswith("::3")  # the fourth replica of the fourth GPU


def _get(server, path: str) -> dict:
    with urllib.request.urlopen(server.url + path, timeout=5) as resp:
        return json.loads(resp.read())


def test_adding_a_toleration_reschedules_the_pod(core, ns):
    core.create_namespaced_pod(ns, pod("late", pod_spec(container(gpus=1),
                                                        node_selector={"gputype": "t4"})))
    unschedulable(core, ns, "late")
    core.patch_namespaced_pod("late", ns, {"spec": {"tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
    assert scheduled_node(core, ns, "late") == "gpu-t4-1"
