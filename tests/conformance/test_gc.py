"""Garbage collection through ownerReferences: Background, Foreground and Orphan deletes."""

from __future__ import annotations

from kubernetes import client

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually


def running_deployment(cluster: Cluster, ns: str, replicas: int = 2) -> tuple[str, list[str]]:
    """A Deployment with its pods up: (its ReplicaSet's name, its pods' names)."""
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=replicas))

    def ready() -> tuple[str, list[str]] | None:
        rss = cluster.apps.list_namespaced_replica_set(ns).items
        pods = cluster.core.list_namespaced_pod(ns, label_selector="app=web").items
        if len(rss) == 1 and len(pods) == replicas:
            return rss[0].metadata.name, sorted(p.metadata.name for p in pods)
        return None

    return eventually(ready, what="ReplicaSet and pods")


def remaining(cluster: Cluster, ns: str) -> tuple[list[str], list[str]]:
    rss = [r.metadata.name for r in cluster.apps.list_namespaced_replica_set(ns).items]
    pods = [p.metadata.name for p in cluster.core.list_namespaced_pod(ns).items]
    return rss, pods


def test_background_delete_collects_replicasets_and_pods(cluster: Cluster, ns: str):
    running_deployment(cluster, ns)
    cluster.apps.delete_namespaced_deployment(
        "web", ns, body=client.V1DeleteOptions(propagation_policy="Background"))
    # the owner is gone at once; its dependents follow
    assert cluster.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web").status == 404
    eventually(lambda: remaining(cluster, ns) == ([], []), what="ReplicaSet and pods collected")


def test_foreground_delete_waits_for_dependents(cluster: Cluster, ns: str):
    running_deployment(cluster, ns)
    resp = cluster.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/web",
                           {"propagationPolicy": "Foreground"})
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "Deployment"
    assert body["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in body["metadata"]["finalizers"]
    eventually(lambda: cluster.request(
        "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web").status == 404,
        what="deployment gone after its dependents")
    assert remaining(cluster, ns) == ([], [])


def test_orphan_delete_keeps_dependents(cluster: Cluster, ns: str):
    rs_name, pod_names = running_deployment(cluster, ns)
    resp = cluster.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/web",
                           {"propagationPolicy": "Orphan"})
    assert resp.status == 200
    eventually(lambda: cluster.request(
        "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web").status == 404,
        what="deployment gone")

    def orphaned() -> bool:
        rs = cluster.apps.read_namespaced_replica_set(rs_name, ns)
        return not rs.metadata.owner_references

    eventually(orphaned, what="ReplicaSet without owner")
    rss, pods = remaining(cluster, ns)
    assert rss == [rs_name] and sorted(pods) == pod_names
    # the pods still belong to the ReplicaSet
    for pod in cluster.core.list_namespaced_pod(ns).items:
        assert [(o.kind, o.name) for o in pod.metadata.owner_references] == [
            ("ReplicaSet", rs_name)]


def test_kubectl_delete_cascades_in_the_background(cluster: Cluster, ns: str):
    running_deployment(cluster, ns, replicas=1)
    out = cluster.kubectl("-n", ns, "delete", "deployment", "web")
    assert out.stdout.startswith('deployment.apps "web" deleted')
    eventually(lambda: remaining(cluster, ns) == ([], []), what="dependents collected")


def test_any_owner_kind_is_collected(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    owner = cluster.request("POST", path, m.configmap("owner")).json()
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    child = m.configmap("child")
    child["metadata"]["ownerReferences"] = [ref]
    shared = m.configmap("shared")
    other = cluster.request("POST", path, m.configmap("other")).json()
    shared["metadata"]["ownerReferences"] = [ref, {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "other",
        "uid": other["metadata"]["uid"]}]
    cluster.request("POST", path, child)
    cluster.request("POST", path, shared)
    cluster.request("DELETE", f"{path}/owner")
    eventually(lambda: cluster.request("GET", f"{path}/child").status == 404,
               what="child collected")

    def trimmed() -> bool:
        refs = cluster.request("GET", f"{path}/shared").json()["metadata"]["ownerReferences"]
        return [r["name"] for r in refs] == ["other"]

    # a dependent with a live owner stays, and loses the reference to the dead one
    eventually(trimmed, what="dangling reference removed")
