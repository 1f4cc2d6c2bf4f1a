"""A node the lifecycle controller gave up on comes back, as a kubelet brings it back: when the
controller misses a node's lease for the grace period (the API server away, or KWOK starved of
CPU on a loaded machine), it sets the node's conditions Unknown and marks its pods not Ready.
A real kubelet sets both back once it reaches the API server again; KWOK's stages
(stack/k8s/kwok-stages.yaml) must too, or a notebook that ran before a cluster outage stays
"waiting until it is ready" for good. Here the controller's two writes are made by the test, on
a node and a pod of its own."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from kubernetes import client

from stack.k8s.cluster import KWOK_NODE_ANNOTATION
from tests.support.cluster import namespace_deleted
from tests.support.waiting import eventually

pytestmark = [pytest.mark.realcluster, pytest.mark.timeout(180)]


def ready(conditions) -> str | None:
    return next((c.status for c in conditions or [] if c.type == "Ready"), None)


def test_a_node_marked_unknown_and_its_pods_not_ready_are_ready_again(cluster):
    name = f"recover-{uuid.uuid4().hex[:8]}"
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        now = dt.datetime.now(dt.UTC)
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name,
                                       "annotations": {KWOK_NODE_ANNOTATION: "fake"}}})
        # a kubelet's first status: its capacity, Ready
        resources = {"cpu": "4", "memory": "8Gi", "pods": "10"}
        core.patch_node_status(name, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": kind, "status": "True" if kind == "Ready" else "False",
                            "reason": "Kubelet", "lastHeartbeatTime": now.isoformat(),
                            "lastTransitionTime": now.isoformat()}
                           for kind in ("MemoryPressure", "DiskPressure", "PIDPressure",
                                        "Ready")]}})
        core.create_namespace({"metadata": {"name": name}})
        try:
            core.create_namespaced_pod(name, {
                "metadata": {"name": "p"},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox"}]}})
            eventually(lambda: ready(core.read_namespaced_pod_status("p", name)
                                     .status.conditions) == "True",
                       timeout=60, message="the pod Ready")

            # the lifecycle controller's writes: every node condition Unknown, the pod not Ready
            node = core.read_node_status(name)
            for condition in node.status.conditions:
                condition.status, condition.reason = "Unknown", "NodeStatusUnknown"
                condition.last_transition_time = now
            core.replace_node_status(name, node)
            pod = core.read_namespaced_pod_status("p", name)
            for condition in pod.status.conditions:
                if condition.type == "Ready":
                    condition.status, condition.last_transition_time = "False", now
            core.replace_namespaced_pod_status("p", name, pod)

            eventually(lambda: ready(core.read_node_status(name).status.conditions) == "True",
                       timeout=30, message="the node Ready again")
            back = core.read_node_status(name).status.conditions
            assert {c.type: c.status for c in back} == {
                c.type: "True" if c.type == "Ready" else "False" for c in back}
            eventually(lambda: ready(core.read_namespaced_pod_status("p", name)
                                     .status.conditions) == "True",
                       timeout=30, message="the pod Ready again")
            assert core.read_namespaced_pod_status("p", name).status.phase == "Running"
        finally:
            # the namespace first, gone before its node goes: KWOK, the node's kubelet, deletes
            # the pod at once; a pod left on a deleted node waits for the pod garbage
            # collector's 40 s quarantine of orphans before it goes, and its namespace with it
            namespace_deleted(api, name)
            core.delete_node(name)
