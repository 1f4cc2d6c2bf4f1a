"""The portal's core journeys on the real control plane: REST API → admission → Celery task (eager)
→ kube-apiserver (as the portal's least-privilege ServiceAccount) → real scheduler, controllers,
KWOK nodes, MetalLB → the tracker's list + watch → the workload's state.

What kubesim only imitated is real here: RBAC on every call, Pod Security admission on the tenant
namespace, ResourceQuota admission, the scheduler's placement and its messages, the Deployment,
ReplicaSet, Job and garbage-collector controllers.
"""

from __future__ import annotations

import pytest
from django.test import Client
from kubernetes import client as k8s

from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.journeys import (  # noqa: F401 - fixtures
    launched,
    researcher,
    track_until,
    vision,
)
from tests.support.waiting import eventually
from tests.workloads.api_calls import delete, launch, post
from tests.workloads.test_journeys import (  # noqa: F401 - collected here, on the real cluster
    test_a_launch_into_a_namespace_deleted_behind_the_portals_back_runs,
    test_a_launch_into_a_namespace_still_being_deleted_waits_and_then_says_why,
)
from workloads.models import Workload

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180),
              pytest.mark.usefixtures("eager_celery")]
S = Workload.State


@pytest.fixture
def admin_api(cluster):
    """The test's own client of the cluster (an operator's kubectl, as admin)."""
    with cluster.api_client() as api:
        yield api


@pytest.mark.parametrize(("template", "gpu_type", "port", "path"), [
    ("jupyter", "a100", 8888, "/lab"),
    ("digits", "v100", 5000, ""),
    ("tensorboard", "a100", 6006, ""),
])
def test_a_service_template_runs_with_its_address(vision, researcher, cluster, template,
                                                 gpu_type, port, path):
    if template == "digits":  # it may run as root: only where an admin allowed it (item 5)
        vision.allow_root_templates = True
        vision.save(update_fields=["allow_root_templates"])
        tenant_reconcile(tenant_id=vision.pk)
    workload_id = launched(researcher, {"name": f"{template} one", "template": template,
                                        "gpu_type": gpu_type, "gpu_count": 1})
    workload = track_until(workload_id, lambda w: w.state == S.RUNNING and w.address)
    assert workload.node.startswith(f"gpu-{gpu_type}-")
    # MetalLB's controller gave the LoadBalancer Service an address of the inventory's pool
    assert workload.address.startswith("192.168.1.")
    assert workload.url == f"http://{workload.address}:{port}{path or '/'}"
    body = Client().get(f"/api/v1/workloads/{workload_id}/", **researcher).json()
    assert body["state"] == "running" and body["url"] == workload.url and body["started_at"]
    # the pod the real ReplicaSet controller made, placed by the real scheduler by nodeSelector
    pods = k8s.CoreV1Api(cluster.api_client()).list_namespaced_pod(
        vision.namespace, label_selector=f"gpu-portal.io/workload-id={workload_id}").items
    assert len(pods) == 1 and pods[0].spec.node_name == workload.node
    assert pods[0].spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"


def test_a_custom_service_runs_with_its_address(vision, researcher):
    workload_id = launched(researcher, {
        "name": "web ui", "template": "custom", "kind": "service", "image": "nginx:1.27",
        "gpu_type": "v100", "gpu_count": 1, "port": 8080})
    workload = track_until(workload_id, lambda w: w.state == S.RUNNING and w.address)
    assert workload.url == f"http://{workload.address}:{workload.port}/"
    assert workload.address.startswith("192.168.1.") and workload.port == 8080


def test_a_custom_batch_job_succeeds_and_one_that_exits_non_zero_fails(vision, researcher):
    ok = launched(researcher, {
        "name": "train", "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "gpu_type": "v100", "gpu_count": 1, "command": ["python", "train.py"],
        "env": {"KUBESIM_RUN_SECONDS": "1"}})
    bad = launched(researcher, {
        "name": "crash", "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "gpu_type": "v100", "gpu_count": 1,
        "env": {"KUBESIM_RUN_SECONDS": "1", "KUBESIM_EXIT_CODE": "3"}})
    workload = track_until(ok, lambda w: w.state in Workload.FINAL_STATES)
    assert workload.state == S.SUCCEEDED, workload.reason
    assert workload.exit_code == 0 and workload.finished_at is not None
    failed = track_until(bad, lambda w: w.state in Workload.FINAL_STATES, timeout=90)
    assert failed.state == S.FAILED and failed.exit_code == 3
    reasons = [e.reason for e in workload.events.all()]
    assert "Submitted" in reasons and "Created" in reasons


def test_the_portal_quota_refuses_with_403(vision, researcher):
    response = launch(researcher, {"name": "too many", "template": "jupyter", "gpu_type": "a100",
                                   "gpu_count": 5})
    assert response.status_code == 403
    assert response.json()["code"] == "quota_exceeded"
    assert not Workload.objects.filter(name="too many").exists()


def test_the_namespace_resource_quota_refuses_the_pod(vision, researcher, cluster):
    """An admin lowered the ResourceQuota by hand under the portal's quota: the real quota
    admission refuses the ReplicaSet's pod and the portal says so."""
    k8s.CoreV1Api(cluster.api_client()).patch_namespaced_resource_quota(
        "gpu-portal-quota", vision.namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})
    workload_id = launched(researcher, {"name": "two", "template": "jupyter", "gpu_type": "a100",
                                        "gpu_count": 2})
    workload = track_until(workload_id, lambda w: "exceeded quota" in w.reason)
    assert workload.state == S.PENDING
    assert "exceeded quota: gpu-portal-quota, requested: requests.nvidia.com/gpu=2, " \
           "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1" in workload.reason
    tenant_reconcile(tenant_id=vision.pk)  # the portal puts its quota back …
    # … and the ReplicaSet controller's next try is admitted: it starts by itself
    track_until(workload_id, lambda w: w.state == S.RUNNING, timeout=90)


def test_pending_with_the_schedulers_message_then_starts_when_gpus_free(vision, researcher):
    quota_update(tenant=vision, acting_user=None,
                 changes={"gpus_total": 40, "gpus_by_type": {"a100": 20}})
    tenant_reconcile(tenant_id=vision.pk)
    big = [launched(researcher, {"name": f"big {i}", "template": "custom", "kind": "batch",
                                 "image": "busybox:1.36", "gpu_type": "a100", "gpu_count": 8,
                                 "env": {"KUBESIM_RUN_SECONDS": "600"}}) for i in range(2)]
    for workload_id in big:
        track_until(workload_id, lambda w: w.state == S.RUNNING)
    waiting = launched(researcher, {"name": "small", "template": "jupyter", "gpu_type": "a100",
                                    "gpu_count": 1})
    workload = track_until(waiting, lambda w: w.state == S.PENDING
                           and "nodes are available" in w.reason)
    # the real kube-scheduler's words
    assert workload.reason.startswith("0/9 nodes are available: 2 Insufficient nvidia.com/gpu, ")
    assert "preemption: 0/9 nodes are available: 2 No preemption victims found for incoming pod" \
        in workload.reason
    assert post(f"/api/v1/workloads/{big[0]}/stop/", researcher).status_code == 202
    workload = track_until(waiting, lambda w: w.state == S.RUNNING, timeout=90)
    assert workload.node.startswith("gpu-a100-")


def test_stop_and_delete_leave_nothing_behind(vision, researcher, cluster):
    workload_id = launched(researcher, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                                        "gpu_count": 1})
    track_until(workload_id, lambda w: w.state == S.RUNNING)
    selector = f"gpu-portal.io/workload-id={workload_id}"
    core = k8s.CoreV1Api(cluster.api_client())
    assert core.list_namespaced_pod(vision.namespace, label_selector=selector).items
    assert post(f"/api/v1/workloads/{workload_id}/stop/", researcher).status_code == 202
    track_until(workload_id, lambda w: w.state == S.STOPPED)
    # the garbage collector took the ReplicaSet and the pod with the Deployment
    apps = k8s.AppsV1Api(cluster.api_client())
    def collected() -> bool:
        left = (core.list_namespaced_pod(vision.namespace, label_selector=selector).items
                + apps.list_namespaced_replica_set(vision.namespace, label_selector=selector).items
                + core.list_namespaced_service(vision.namespace, label_selector=selector).items)
        assert not left, [o.metadata.name for o in left]
        return True

    eventually(collected, timeout=30, interval=0.3,
               message="the Deployment's ReplicaSet, pod or Service stayed")
    assert delete(f"/api/v1/workloads/{workload_id}/", researcher).status_code == 204
    assert Client().get(f"/api/v1/workloads/{workload_id}/", **researcher).status_code == 404
