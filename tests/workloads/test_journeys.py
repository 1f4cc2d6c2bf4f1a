"""The journeys end to end: API → admission → task → kubesim → tracker → state.

A kubesim of their own (the demo inventory): these tests fill its GPUs on purpose.
"""

import logging

import pytest
from django.test import Client
from kubernetes import client as k8s

from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support import journeys
from tests.support.cluster import cluster_objects_of_the_test, namespace_gone
from tests.support.journeys import launched, track_until
from tests.workloads.api_calls import post, vision_lab_ready
from workloads import tasks
from workloads.models import Workload

pytestmark = pytest.mark.django_db

researcher = journeys.researcher  # the API's headers (not the pages' client of the conftest)


@pytest.fixture(scope="module")
def own_kubesim(kubesim_factory):
    return kubesim_factory(inventory=DEMO_INVENTORY)


@pytest.fixture
def vision(login, gpu_types, own_kubesim, settings, eager_celery):
    """vision-lab in this module's kubesim; what a test made there is gone before the next."""
    settings.KUBECONFIG = str(own_kubesim.kubeconfig)
    with cluster_objects_of_the_test(own_kubesim.api_client, timeout=30):
        yield vision_lab_ready(login)


@pytest.fixture
def admin_api(own_kubesim):
    """The test's own client of the cluster (an operator's kubectl)."""
    with own_kubesim.api_client() as api:
        yield api


def stop(headers, workload_id):
    assert post(f"/api/v1/workloads/{workload_id}/stop/", headers).status_code == 202


def test_jupyter_on_an_a100_runs_and_has_its_url(vision, researcher):
    workload_id = launched(researcher, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                                      "gpu_count": 1})
    workload = track_until(workload_id, lambda w: w.state == "running" and w.address)
    assert workload.node.startswith("gpu-a100-")
    # no token in the URL: the proxy in front of Jupyter logs the user in and hands the token on
    assert workload.url == f"http://{workload.address}:8888/lab"
    assert workload.access_token and workload.access_token not in workload.url
    body = Client().get(f"/api/v1/workloads/{workload_id}/", **researcher).json()
    assert body["url"] == workload.url and body["started_at"]
    logs = Client().get(f"/api/v1/workloads/{workload_id}/logs/?tail=50", **researcher).json()
    assert any(workload.access_token in line for line in logs["lines"])


def test_a_custom_batch_job_on_a_v100_succeeds(vision, researcher):
    workload_id = launched(researcher, {
        "name": "train", "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "gpu_type": "v100", "gpu_count": 1, "command": ["python", "train.py"],
        "env": {"KUBESIM_RUN_SECONDS": "1"}})
    workload = track_until(workload_id, lambda w: w.state in Workload.FINAL_STATES)
    assert workload.state == "succeeded", workload.reason
    assert workload.exit_code == 0 and workload.finished_at is not None
    reasons = [e.reason for e in workload.events.all()]
    assert "Submitted" in reasons and "Created" in reasons


def test_within_quota_but_beyond_free_capacity_waits_then_starts_when_gpus_free(vision,
                                                                              researcher):
    # the quota allows more a100s than the cluster has free once these two run (2 × 8 a100)
    quota_update(tenant=vision, acting_user=None,
                 changes={"gpus_total": 40, "gpus_by_type": {"a100": 20}})
    tenant_reconcile(tenant_id=vision.pk)  # the namespace's ResourceQuota follows
    big = [launched(researcher, {"name": f"big {i}", "template": "custom", "kind": "batch",
                               "image": "busybox:1.36", "gpu_type": "a100", "gpu_count": 8,
                               "env": {"KUBESIM_RUN_SECONDS": "600"}}) for i in range(2)]
    for workload_id in big:
        track_until(workload_id, lambda w: w.state == "running")
    waiting = launched(researcher, {"name": "small", "template": "jupyter", "gpu_type": "a100",
                                  "gpu_count": 1})
    workload = track_until(waiting, lambda w: w.state == "pending" and "nodes are available" in w.reason)
    assert "Insufficient nvidia.com/gpu" in workload.reason
    assert workload.reason.startswith("0/9 nodes are available: 2 Insufficient nvidia.com/gpu")
    stop(researcher, big[0])
    workload = track_until(waiting, lambda w: w.state == "running")
    assert workload.node.startswith("gpu-a100-")


def test_a_launch_into_a_namespace_deleted_behind_the_portals_back_runs(
        vision, researcher, admin_api, monkeypatch, caplog):
    """A tenant marked provisioned whose namespace is gone (an operator
    deleted it; the demo was started against another cluster). The launch provisions the tenant
    again, saying so meanwhile, and runs; no traceback for what is expected. It hung in
    `creating` with an empty reason until the periodic reconcile."""
    k8s.CoreV1Api(admin_api).delete_namespace(vision.namespace)  # as an operator would
    namespace_gone(k8s.CoreV1Api(admin_api), vision.namespace)
    assert Tenant.objects.get(pk=vision.pk).state == Tenant.State.PROVISIONED  # none the wiser
    seen = []

    def reconcile(**kwargs):  # the real one; what the workload shows while it runs
        seen.extend(Workload.objects.filter(tenant=vision).values_list("state", "reason"))
        return tenant_reconcile(**kwargs)

    monkeypatch.setattr(tasks, "tenant_reconcile", reconcile, raising=False)
    with caplog.at_level(logging.INFO):
        workload_id = launched(researcher, {"name": "nb", "template": "jupyter",
                                            "gpu_type": "a100", "gpu_count": 1})
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert len(seen) == 1, Workload.objects.get(pk=workload_id).reason
    state, reason = seen[0]
    assert state == "creating" and reason.startswith("Preparing the project's namespace")
    k8s.CoreV1Api(admin_api).read_namespace(vision.namespace)  # made again
    workload = track_until(workload_id, lambda w: w.state == "running", timeout=60)
    assert Tenant.objects.get(pk=vision.pk).state == Tenant.State.PROVISIONED
    events = {e.reason: e.message for e in workload.events.all()}
    assert "ResourceQuota" in events["NamespaceProvisioned"]


def test_a_launch_into_a_namespace_still_being_deleted_waits_and_then_says_why(
        vision, researcher, admin_api, monkeypatch):
    """A namespace an operator is deleting takes no new objects ("… because it is being
    terminated") and must not be provisioned again until it is gone: the launch waits, saying
    so, and fails naming it only when the deletion never ends (a finalizer that holds it; the
    eager tasks of the tests take their ten retries at once). Once it is gone, a launch runs."""
    core = k8s.CoreV1Api(admin_api)
    hold = {"metadata": {"finalizers": ["example.org/operator-hold"]}}
    core.patch_namespace(vision.namespace, hold)
    core.delete_namespace(vision.namespace)
    reasons = []

    def backoff(retries: int) -> int:  # the real one; what the workload says at each retry
        reasons.extend(Workload.objects.filter(tenant=vision).values_list("reason", flat=True))
        return tasks.MAX_BACKOFF_SECONDS

    monkeypatch.setattr(tasks, "_backoff", backoff)
    workload_id = launched(researcher, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                                        "gpu_count": 1})
    workload = Workload.objects.get(pk=workload_id)
    assert workload.state == "failed"
    assert workload.reason.startswith("The project's namespace stayed in deletion on the "
                                      "cluster: ") and "being terminated" in workload.reason
    assert len(reasons) == tasks.MAX_RETRIES
    assert all(r.startswith("Waiting for the project's namespace, which is being deleted")
               for r in reasons), reasons
    assert core.read_namespace(vision.namespace).metadata.deletion_timestamp  # not touched
    core.patch_namespace(vision.namespace, {"metadata": {"finalizers": None}})
    monkeypatch.undo()
    namespace_gone(k8s.CoreV1Api(admin_api), vision.namespace)
    workload_id = launched(researcher, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                                        "gpu_count": 1})
    assert track_until(workload_id, lambda w: w.state == "running",
                       timeout=60).state == "running"


def test_a_launch_whose_namespace_cannot_be_made_again_fails_saying_why(
        vision, researcher, admin_api, caplog):
    """The tenant is being deleted (the launch was admitted a moment before): its namespace is
    not made again, and the launch fails naming the missing namespace rather than hanging in
    `creating` behind a traceback."""
    workload_id = launched(researcher, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                                        "gpu_count": 1})
    k8s.CoreV1Api(admin_api).delete_namespace(vision.namespace)
    namespace_gone(k8s.CoreV1Api(admin_api), vision.namespace)
    Tenant.objects.filter(pk=vision.pk).update(state=Tenant.State.DELETING)
    Workload.objects.filter(pk=workload_id).update(state=Workload.State.SUBMITTED)
    with caplog.at_level(logging.INFO):
        tasks.workload_create_task.delay(workload_id)
    workload = Workload.objects.get(pk=workload_id)
    assert workload.state == "failed"
    assert workload.reason == (f'The cluster refused it: namespaces "{vision.namespace}" '
                               "not found")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
