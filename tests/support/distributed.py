"""JobSets and MPIJobs on the control plane with Kueue: a namespace with a queue of its own,
and the conditions Kueue and the engines set."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from tests.support.cluster import namespace_deleted
from tests.support.waiting import eventually

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = "default"
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
MPIJOB = ("kubeflow.org", "v2beta1", "mpijobs")


class Queue:
    """A namespace (Pod Security `restricted`) with a LocalQueue of its own ClusterQueue
    holding `gpus` A100s (no cohort: nothing to borrow) and CPUs and memory enough."""

    def __init__(self, api: Any, gpus: int) -> None:
        from kubernetes import client

        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = f"dist-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": self.namespace, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted"}}})
        # as the portal's (tenants/kueue.py): CPU and memory in a flavor of any node, GPUs
        # in one of the A100 nodes (whose labels Kueue gives the pods it admits)
        self.flavors = {f"{self.namespace}-cpu": {}, f"{self.namespace}-a100": {
            "nodeLabels": {"gputype": "a100"}}}
        for name, spec in self.flavors.items():
            self.custom.create_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "resourceflavors", {
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": {"name": name}, "spec": spec})
        self.custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": self.namespace},
            "spec": {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": self.namespace}},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"],
                     "flavors": [{"name": f"{self.namespace}-cpu", "resources": [
                         {"name": "cpu", "nominalQuota": "64"},
                         {"name": "memory", "nominalQuota": "256Gi"}]}]},
                    {"coveredResources": ["nvidia.com/gpu"],
                     "flavors": [{"name": f"{self.namespace}-a100", "resources": [
                         {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]}})
        self.custom.create_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", self.namespace, "localqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": self.namespace},
                "spec": {"clusterQueue": self.namespace}})

    def create(self, kind: tuple[str, str, str], body: dict) -> dict:
        return self.custom.create_namespaced_custom_object(*kind[:2], self.namespace, kind[2],
                                                           body)

    def get(self, kind: tuple[str, str, str], name: str) -> dict:
        return self.custom.get_namespaced_custom_object(*kind[:2], self.namespace, kind[2], name)

    def workloads_of(self, owner: dict) -> list[dict]:
        """The Kueue Workloads owned by `owner` (a JobSet or MPIJob as created)."""
        items = self.custom.list_namespaced_custom_object(*WORKLOADS[:2], self.namespace,
                                                          WORKLOADS[2])["items"]
        uid = owner["metadata"]["uid"]
        return [w for w in items
                if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences") or ())]

    def workload_of(self, owner: dict) -> dict:
        """Its one Workload (waited for: Kueue makes it when it sees the owner)."""
        found = eventually(lambda: self.workloads_of(owner), timeout=30,
                           message=f"a Workload for {owner['metadata']['name']}")
        assert len(found) == 1, [w["metadata"]["name"] for w in found]
        return found[0]

    def pods(self, selector: str) -> list:
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items

    def delete(self) -> None:
        from kubernetes.client.rest import ApiException

        namespace_deleted(self.core.api_client, self.namespace)
        for plural, name in (("clusterqueues", self.namespace),
                             *(("resourceflavors", f) for f in self.flavors)):
            with contextlib.suppress(ApiException):
                self.custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural,
                                                         name)


def condition(obj: dict, kind: str) -> str | None:
    """The status ("True"/"False") of a condition of an object's status, or None."""
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or ()
                 if c["type"] == kind), None)


def launcher_succeeded(mpijob: dict) -> bool:
    """The MPIJob Succeeded and its status counts the launcher's success (the operator may
    write the two in separate updates)."""
    launcher = ((mpijob.get("status") or {}).get("replicaStatuses") or {}).get("Launcher") or {}
    return condition(mpijob, "Succeeded") == "True" and launcher.get("succeeded") == 1
