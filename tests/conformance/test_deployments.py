"""Deployments and their ReplicaSets: names, status, conditions, rollouts, quota refusals."""

from __future__ import annotations

import re

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, condition, events_for, eventually, make_quota


def deployment_json(cluster: Cluster, ns: str, name: str = "web") -> dict:
    return cluster.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}").json()


def available(cluster: Cluster, ns: str, replicas: int, name: str = "web") -> dict:
    def check() -> dict | None:
        dep = deployment_json(cluster, ns, name)
        status = dep.get("status") or {}
        done = (status.get("availableReplicas") == replicas
                and status.get("updatedReplicas") == replicas
                and status.get("replicas") == replicas
                and status.get("observedGeneration") == dep["metadata"]["generation"]
                and (condition(dep, "Progressing") or {}).get("reason")
                == "NewReplicaSetAvailable")
        return dep if done else None

    return eventually(check, what=f"deployment {name} available with {replicas}")


def test_replicaset_and_pod_names(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=2))
    available(cluster, ns, 2)
    [rs] = cluster.apps.list_namespaced_replica_set(ns).items
    template_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{template_hash}"
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}", template_hash)
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": template_hash}
    [owner] = rs.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("Deployment", "web", True)
    for pod in cluster.core.list_namespaced_pod(ns).items:
        assert re.fullmatch(rf"web-{template_hash}-[a-z0-9]{{5}}", pod.metadata.name)
        assert pod.metadata.labels == {"app": "web", "pod-template-hash": template_hash}


def test_deployment_status_when_available(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=2))
    dep = available(cluster, ns, 2)
    status = dep["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
            status["availableReplicas"]) == (2, 2, 2, 2)
    assert "unavailableReplicas" not in status
    rs_name = cluster.apps.list_namespaced_replica_set(ns).items[0].metadata.name
    avail = condition(dep, "Available")
    assert (avail["status"], avail["reason"], avail["message"]) == (
        "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
    progressing = condition(dep, "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "True", "NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
    assert {"lastUpdateTime", "lastTransitionTime"} <= set(progressing)
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


def test_deployment_events(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=2))
    available(cluster, ns, 2)
    rs_name = cluster.apps.list_namespaced_replica_set(ns).items[0].metadata.name
    scaled = eventually(lambda: [e for e in events_for(cluster, ns, "web")
                                 if e["reason"] == "ScalingReplicaSet"], what="scaling event")
    assert scaled[0]["message"] == f"Scaled up replica set {rs_name} from 0 to 2"
    created = eventually(lambda: [e for e in events_for(cluster, ns, rs_name)
                                  if e["reason"] == "SuccessfulCreate"], what="create events")
    assert all(re.fullmatch(rf"Created pod: {rs_name}-[a-z0-9]{{5}}", e["message"])
               for e in created)


def test_rollout_makes_a_new_replicaset(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=1))
    available(cluster, ns, 1)
    cluster.apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"metadata": {
        "annotations": {"rev": "2"}}}}})
    dep = available(cluster, ns, 1)
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"

    def settled() -> dict | None:
        rss = {r.metadata.annotations["deployment.kubernetes.io/revision"]: r
               for r in cluster.apps.list_namespaced_replica_set(ns).items}
        if set(rss) == {"1", "2"} and rss["1"].spec.replicas == 0 \
                and not rss["1"].status.replicas:
            return rss
        return None

    rss = eventually(settled, what="old ReplicaSet scaled to 0")
    assert rss["2"].spec.replicas == 1
    eventually(lambda: [p.metadata.labels["pod-template-hash"]
                        for p in cluster.core.list_namespaced_pod(ns).items]
               == [rss["2"].metadata.labels["pod-template-hash"]], what="only new pods")


def test_scale_subresource(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=1))
    available(cluster, ns, 1)
    scale = cluster.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale").json()
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"] == {"replicas": 1, "selector": "app=web"}
    resp = cluster.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
                           {"spec": {"replicas": 3}},
                           content_type="application/merge-patch+json")
    assert resp.status == 200 and resp.json()["spec"] == {"replicas": 3}
    available(cluster, ns, 3)


def test_quota_refusal_shows_as_replica_failure(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"requests.nvidia.com/gpu": "1"})
    dep = m.deployment("gpu", replicas=2, spec=m.pod_spec(m.container(gpus=1),
                                                          tolerate_gpu=True))
    # the quota does not refuse the Deployment itself
    assert cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                           dep).status == 201
    quota_text = (r'pods "gpu-[a-z0-9]+-[a-z0-9]{5}" is forbidden: exceeded quota: q, '
                  r"requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
                  r"limited: requests.nvidia.com/gpu=1")

    def failure() -> dict | None:
        cond = condition(deployment_json(cluster, ns, "gpu"), "ReplicaFailure")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(failure, what="ReplicaFailure condition")
    assert cond["reason"] == "FailedCreate"
    assert re.fullmatch(quota_text, cond["message"]), cond["message"]
    rs_name = cluster.apps.list_namespaced_replica_set(ns).items[0].metadata.name
    event = eventually(lambda: next((e for e in events_for(cluster, ns, rs_name)
                                     if e["reason"] == "FailedCreate"), None),
                       what="FailedCreate event")
    assert event["type"] == "Warning"
    assert re.fullmatch("Error creating: " + quota_text, event["message"]), event["message"]
    assert len(cluster.core.list_namespaced_pod(ns).items) == 1
