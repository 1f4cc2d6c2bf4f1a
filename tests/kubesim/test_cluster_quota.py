"""ResourceQuota and LimitRange admission over HTTP: the exact 403 bodies, status.used kept
current, and how a Deployment or Job shows a refused pod (FailedCreate, ReplicaFailure)."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.cluster_helpers import (
    condition,
    container,
    deployment,
    event_reasons,
    job,
    pod,
    pod_spec,
    status_body,
)
from tests.support.waiting import eventually


def quota(name: str, hard: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": hard}}


def test_pod_over_gpu_quota_is_forbidden(core, kube_namespace):
    ns = kube_namespace
    created = core.create_namespaced_resource_quota(
        ns, quota("gpu-quota", {"requests.nvidia.com/gpu": "2", "pods": "10"}))
    # The status is filled in as the quota is written, so it works at once.
    assert created.status.hard == {"requests.nvidia.com/gpu": "2", "pods": "10"}
    assert created.status.used == {"requests.nvidia.com/gpu": "0", "pods": "0"}
    core.create_namespaced_pod(ns, pod("first", pod_spec(container(gpus=2), tolerate_gpu=True)))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("second", pod_spec(container(gpus=1),
                                                               tolerate_gpu=True)))
    assert err.value.status == 403
    body = status_body(err.value)
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "second" is forbidden: exceeded quota: gpu-quota, requested: '
                   "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: "
                   "requests.nvidia.com/gpu=2",
        "reason": "Forbidden", "details": {"name": "second", "kind": "pods"}, "code": 403,
    }
    used = eventually(lambda: (q := core.read_namespaced_resource_quota("gpu-quota", ns))
                      .status.used.get("pods") == "1" and q.status.used,
                      message="waiting for quota usage recorded", ignoring=(ApiException,))
    assert used == {"requests.nvidia.com/gpu": "2", "pods": "1"}
    # CPU pods do not count against the GPU limit, only against `pods`.
    core.create_namespaced_pod(ns, pod("cpu", pod_spec(container())))
    core.delete_namespaced_pod("first", ns, grace_period_seconds=0)
    eventually(lambda: core.read_namespaced_resource_quota("gpu-quota", ns).status.used
               == {"requests.nvidia.com/gpu": "0", "pods": "1"},
               message="waiting for usage released", ignoring=(ApiException,))


def test_only_exceeded_resources_are_named_sorted(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_resource_quota(ns, quota("compute", {
        "requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "4", "pods": "5"}))
    core.create_namespaced_pod(ns, pod("a", pod_spec(container(cpu="600m", memory="512Mi"))))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("b", pod_spec(container(cpu="500m", memory="768Mi"))))
    assert status_body(err.value)["message"] == (
        'pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=500m,'
        "requests.memory=768Mi, used: requests.cpu=600m,requests.memory=512Mi, limited: "
        "requests.cpu=1,requests.memory=1Gi")
    # cpu/memory quotas require every container to state them.
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("c", pod_spec(container())))
    assert status_body(err.value)["message"] == (
        'pods "c" is forbidden: failed quota: compute: must specify limits.cpu for: app; '
        "requests.cpu for: app; requests.memory for: app")


def test_limit_range_defaults_make_pods_count(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_limit_range(ns, {
        "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                             "defaultRequest": {"cpu": "250m", "memory": "128Mi"}}]}})
    core.create_namespaced_resource_quota(ns, quota("compute", {
        "requests.cpu": "1", "limits.cpu": "2", "requests.memory": "1Gi"}))
    created = core.create_namespaced_pod(ns, pod("plain", pod_spec(container())))
    resources = created.spec.containers[0].resources
    assert resources.requests == {"cpu": "250m", "memory": "128Mi"}
    assert resources.limits == {"cpu": "500m", "memory": "256Mi"}
    eventually(lambda: core.read_namespaced_resource_quota("compute", ns).status.used
               == {"requests.cpu": "250m", "limits.cpu": "500m", "requests.memory": "128Mi"},
               message="waiting for defaults counted", ignoring=(ApiException,))


def test_status_unknown_for_quota(core, kube_namespace):
    ns = kube_namespace
    q = core.create_namespaced_resource_quota(ns, quota("q", {"pods": "3"}))
    # Someone (here: us) wipes the usage the quota controller recorded.
    core.replace_namespaced_resource_quota_status("q", ns, {
        "metadata": {"name": "q", "resourceVersion": q.metadata.resource_version},
        "status": {"hard": {"pods": "3"}}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("p", pod_spec(container())))
    assert err.value.status == 403
    assert status_body(err.value)["message"] == (
        'pods "p" is forbidden: status unknown for quota: q, resources: pods')


def test_services_loadbalancers_quota(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_resource_quota(ns, quota("lb", {"services.loadbalancers": "0"}))
    svc = {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "selector": {"a": "b"},
                                                 "ports": [{"port": 80}]}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(ns, svc)
    assert status_body(err.value)["message"] == (
        'services "web" is forbidden: exceeded quota: lb, requested: services.loadbalancers=1, '
        "used: services.loadbalancers=0, limited: services.loadbalancers=0")
    svc["spec"]["type"] = "ClusterIP"
    core.create_namespaced_service(ns, svc)


def test_object_count_quota(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_resource_quota(ns, quota("counts", {"count/configmaps": "1"}))
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "two"}})
    assert status_body(err.value)["message"] == (
        'configmaps "two" is forbidden: exceeded quota: counts, requested: count/configmaps=1, '
        "used: count/configmaps=1, limited: count/configmaps=1")


def test_deployment_pod_refused_shows_failed_create(core, apps, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_resource_quota(ns, quota("gpu-quota", {"requests.nvidia.com/gpu": "1"}))
    apps.create_namespaced_deployment(ns, deployment("web", pod_spec(container(gpus=1),
                                                                     tolerate_gpu=True),
                                                     replicas=2))

    def refused():
        rs = apps.list_namespaced_replica_set(ns).items
        return rs[0] if rs and condition(rs[0], "ReplicaFailure") else None

    rs = eventually(refused, message="waiting for ReplicaFailure on the ReplicaSet",
                    ignoring=(ApiException,))
    failure = condition(rs, "ReplicaFailure")
    assert failure.status == "True" and failure.reason == "FailedCreate"
    prefix = f'pods "{rs.metadata.name}-'
    assert failure.message.startswith(prefix)
    assert failure.message.endswith(
        '" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1")
    events = event_reasons(core, ns, rs.metadata.name)
    assert ("FailedCreate", f"Error creating: {failure.message}") in [
        (r, m) for r, m in events if r == "FailedCreate"] or any(
        r == "FailedCreate" and m.startswith(f"Error creating: {prefix}") for r, m in events)
    d = eventually(lambda: (d := apps.read_namespaced_deployment("web", ns))
                   and condition(d, "ReplicaFailure") and d,
                   message="waiting for copied to the Deployment", ignoring=(ApiException,))
    assert condition(d, "ReplicaFailure").reason == "FailedCreate"
    assert len(core.list_namespaced_pod(ns).items) == 1
    # More quota: the ReplicaSet creates the missing pod and the condition goes away.
    core.patch_namespaced_resource_quota("gpu-quota", ns,
                                         {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    eventually(lambda: len(core.list_namespaced_pod(ns).items) == 2, timeout=15,
               message="waiting for the second pod after the quota grew", ignoring=(ApiException,))
    eventually(lambda: not condition(apps.read_namespaced_deployment("web", ns), "ReplicaFailure"),
               message="waiting for ReplicaFailure cleared", ignoring=(ApiException,))


def test_job_pod_refused_shows_failed_create(core, kube_namespace):
    ns = kube_namespace
    batch = client.BatchV1Api(core.api_client)
    core.create_namespaced_resource_quota(ns, quota("p", {"pods": "0"}))
    batch.create_namespaced_job(ns, job("j", pod_spec(container())))
    eventually(lambda: any(r == "FailedCreate" and "exceeded quota: p, requested: pods=1" in m
                           for r, m in event_reasons(core, ns, "j")),
               message="waiting for FailedCreate on the job", ignoring=(ApiException,))
    core.patch_namespaced_resource_quota("p", ns, {"spec": {"hard": {"pods": "1"}}})
    eventually(lambda: core.list_namespaced_pod(ns).items, timeout=15,
               message="waiting for the retried pod", ignoring=(ApiException,))
