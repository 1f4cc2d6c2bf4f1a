"""ResourceQuota: admission's 403 messages and the quota's status."""

from __future__ import annotations

import re

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually, make_quota

FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "reason": "Forbidden", "code": 403}


def gpu_pod(name: str, gpus: int, **kw) -> dict:
    return m.pod(name, m.pod_spec(m.container(gpus=gpus, **kw), tolerate_gpu=True))


def test_quota_status_is_filled_in(cluster: Cluster, ns: str):
    hard = {"requests.nvidia.com/gpu": "4", "pods": "10", "services.loadbalancers": "1"}
    body = make_quota(cluster, ns, hard)
    assert body["status"]["hard"] == hard
    assert body["status"]["used"] == {k: "0" for k in hard}


def test_quota_usage_follows_pods(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"requests.nvidia.com/gpu": "4", "pods": "10"})
    cluster.core.create_namespaced_pod(ns, gpu_pod("p", 3))

    def used() -> dict | None:
        got = cluster.core.read_namespaced_resource_quota("q", ns).status.used
        return got if got == {"requests.nvidia.com/gpu": "3", "pods": "1"} else None

    eventually(used, what="quota usage after the pod")
    cluster.core.delete_namespaced_pod("p", ns, grace_period_seconds=0)
    eventually(lambda: cluster.core.read_namespaced_resource_quota("q", ns).status.used == {
        "requests.nvidia.com/gpu": "0", "pods": "0"}, what="quota usage released")


def test_exceeded_quota_message(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"requests.nvidia.com/gpu": "1"})
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", gpu_pod("p", 2))
    assert resp.status == 403
    assert resp.json() == {
        **FORBIDDEN, "details": {"name": "p", "kind": "pods"},
        "message": 'pods "p" is forbidden: exceeded quota: q, requested: '
                   "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: "
                   "requests.nvidia.com/gpu=1"}


def test_exceeded_quota_names_only_the_exceeded_resources(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"requests.nvidia.com/gpu": "2", "requests.cpu": "64",
                             "requests.memory": "1Ti", "pods": "1"})
    cluster.core.create_namespaced_pod(ns, gpu_pod("first", 1, cpu="1", memory="1Gi"))
    eventually(lambda: cluster.core.read_namespaced_resource_quota("q", ns).status.used["pods"]
               == "1", what="first pod counted")
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods",
                           gpu_pod("second", 2, cpu="1", memory="1Gi"))
    assert resp.status == 403
    assert resp.json()["message"] == (
        'pods "second" is forbidden: exceeded quota: q, requested: '
        "pods=1,requests.nvidia.com/gpu=2, used: pods=1,requests.nvidia.com/gpu=1, "
        "limited: pods=1,requests.nvidia.com/gpu=2")


def test_quota_refusal_names_the_generated_name(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"pods": "0"})
    body = m.pod(None, generate_name="gen-")
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert resp.status == 403
    message = resp.json()["message"]
    assert re.fullmatch(r'pods "gen-[a-z0-9]{5}" is forbidden: exceeded quota: q, requested: '
                        r"pods=1, used: pods=0, limited: pods=0", message), message


def test_cpu_quota_requires_limits(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"limits.cpu": "4", "limits.memory": "4Gi"})
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", m.pod("p"))
    assert resp.status == 403
    assert resp.json()["message"] == ('pods "p" is forbidden: failed quota: q: must specify '
                                      "limits.cpu for: app; limits.memory for: app")


def test_count_quota_on_secrets(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"count/secrets": "1"})
    path = f"/api/v1/namespaces/{ns}/secrets"
    assert cluster.request("POST", path, {"metadata": {"name": "one"}}).status == 201
    eventually(lambda: cluster.core.read_namespaced_resource_quota("q", ns).status.used == {
        "count/secrets": "1"}, what="secret counted")
    resp = cluster.request("POST", path, {"metadata": {"name": "two"}})
    assert resp.status == 403
    assert resp.json() == {
        **FORBIDDEN, "details": {"name": "two", "kind": "secrets"},
        "message": 'secrets "two" is forbidden: exceeded quota: q, requested: count/secrets=1, '
                   "used: count/secrets=1, limited: count/secrets=1"}


def test_load_balancer_quota(cluster: Cluster, ns: str):
    make_quota(cluster, ns, {"services.loadbalancers": "0"})
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/services",
                           m.service("lb", type_="LoadBalancer"))
    assert resp.status == 403
    assert resp.json()["message"] == (
        'services "lb" is forbidden: exceeded quota: q, requested: services.loadbalancers=1, '
        "used: services.loadbalancers=0, limited: services.loadbalancers=0")
    assert cluster.request("POST", f"/api/v1/namespaces/{ns}/services",
                           m.service("plain")).status == 201
