"""Services placed by the portal on the clusters a project may use, and projects living on each
of them: a notebook on east (the second kubesim, conftest.py) made, tracked, shown, stopped and
deleted there; where a service goes when its launch names no cluster; its state `unknown`
while east does not answer; the project's namespace reconciled on east, repaired there and
removed when the project may no longer use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase

from clusters.models import Cluster
from clusters.services import cluster_probe_one, cluster_register
from kube.client import Kube
from tenants.models import Tenant, TenantCluster
from tenants.provisioning import tenant_clusters_reconcile
from tenants.services import quota_update, tenant_clusters_set
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.journeys import track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import delete, launch, post, vision_lab_ready
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_celery")]

NOTEBOOK = {"name": "nb", "template": "jupyter", "gpu_type": "h100", "gpu_count": 1}
QUOTA = {"gpus_total": 10, "gpus_by_type": {"a100": 4, "v100": 4, "h100": 2}}


@contextlib.contextmanager
def registered(name: str, kubeconfig: str) -> Iterator[Cluster]:
    root, _ = get_user_model().objects.get_or_create(username="root")
    cluster = cluster_register(user=root, fields={"name": name, "kubeconfig_path": kubeconfig})
    probed = cluster_probe_one(cluster_id=cluster.pk)
    assert probed is not None and probed.state == "ready", probed and probed.reason
    yield probed


@pytest.fixture
def vision_on_east(login, gpu_types, cluster, east, h100) -> Iterator[Tenant]:
    """vision-lab with quota for H100s too, east registered; what the test made on east is
    gone after it."""
    with cluster_objects_of_the_test(east.api_client, timeout=30), registered("east", east.kubeconfig):
        tenant = vision_lab_ready(login)
        quota_update(tenant=tenant, acting_user=None, changes=QUOTA)
        yield tenant


def objects_on(kube: Kube, namespace: str, workload_id: int) -> list[str]:
    selector = f"gpu-portal.io/workload-id={workload_id}"
    return [f"{kind} {obj['metadata']['name']}" for kind in ("Deployment", "Service", "Pod")
            for obj in kube.list(kind, namespace, label_selector=selector)["items"]
            if not obj["metadata"].get("deletionTimestamp")]


def test_a_notebook_on_east_runs_there_with_its_address_and_goes_there(vision_on_east,
                                                                      api_headers, as_user):
    headers = api_headers("researcher")
    namespace = vision_on_east.namespace
    home, east = Kube(), Kube(cluster="east")
    # no cluster named: the home cluster has no H100, east has them free
    response = launch(headers, NOTEBOOK)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["cluster"] == "east"
    workload_id = body["id"]
    # its namespace made on east on the way (the project may use every cluster)
    assert TenantCluster.objects.get(tenant=vision_on_east, cluster__name="east").state == \
        "provisioned"
    assert len(objects_on(east, namespace, workload_id)) >= 2
    assert objects_on(home, namespace, workload_id) == []

    workload = track_until(workload_id, lambda w: w.state == "running" and w.address,
                           cluster="east")
    assert workload.address.startswith("192.168.2.")  # east's own pool
    assert workload.node.startswith("gpu-h100-")
    shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
    assert shown["state"] == "running" and shown["url"] == workload.url
    # the home cluster's tracker leaves it alone: not its cluster's to judge
    Tracker().run_for(0.5)
    assert Workload.objects.get(pk=workload_id).state == "running"

    # east stops answering: its workloads' states are unknown, never failed …
    Cluster.objects.filter(name="east").update(state="unreachable",
                                               reason="connection refused")
    shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
    assert shown["state"] == "unknown"
    assert "east does not answer (connection refused)" in shown["reason"]
    listed = Client().get("/api/v1/workloads/", **headers).json()["results"]
    assert [w["state"] for w in listed if w["id"] == workload_id] == ["unknown"]
    page = as_user("researcher").get(f"/workloads/{workload_id}/").content.decode()
    assert "state-unknown" in page and "east does not answer" in page
    assert Workload.objects.get(pk=workload_id).state == "running"
    # … and a new service of the type goes to another cluster that has it
    # (east's kubesim under another name: a second cluster offering H100s)
    with registered("east-two", Cluster.objects.get(name="east").kubeconfig_path):
        again = launch(headers, {**NOTEBOOK, "name": "nb2"})
        assert again.status_code == 201 and again.json()["cluster"] == "east-two"
        post(f"/api/v1/workloads/{again.json()['id']}/stop/", headers)
    # … until it answers again: the real state is back
    Cluster.objects.filter(name="east").update(state="ready", reason="")
    shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
    assert shown["state"] == "running" and shown["reason"] == workload.reason

    # stopped: its objects go from east
    stopped = post(f"/api/v1/workloads/{workload_id}/stop/", headers)
    assert stopped.status_code == 202, stopped.json()
    assert Workload.objects.get(pk=workload_id).state == "stopped"
    eventually(lambda: not objects_on(east, namespace, workload_id), timeout=20,
               message=lambda: f"left on east: {objects_on(east, namespace, workload_id)}")
    assert delete(f"/api/v1/workloads/{workload_id}/", headers).status_code == 204


def test_where_a_launch_goes(vision_on_east, api_headers):
    headers = api_headers("researcher")
    a100 = launch(headers, {**NOTEBOOK, "gpu_type": "a100"})
    assert a100.status_code == 201 and a100.json()["cluster"] == "main"
    # batch work reaches east through the home cluster's Kueue (MultiKueue): without it,
    # naming east is refused, saying so
    batch = launch(headers, {"name": "train", "template": "custom", "kind": "batch",
                             "image": "python:3.12-slim", "gpu_type": "h100", "gpu_count": 1,
                             "cluster": "east"})
    assert batch.status_code == 400
    assert "through the home cluster's Kueue (MultiKueue)" in batch.json()["fields"]["cluster"][0]
    # the home folder's data is on the home cluster
    home = launch(headers, {**NOTEBOOK, "cluster": "east", "use_home": True})
    assert home.status_code == 400
    assert "home folder is on the home cluster (main) only" in home.json()["fields"]["cluster"][0]
    # a project limited to the home cluster keeps its services there
    tenant_clusters_set(tenant=vision_on_east, acting_user=None, names=["main"])
    limited = launch(headers, {**NOTEBOOK, "gpu_type": "a100", "name": "nb3"})
    assert limited.status_code == 201 and limited.json()["cluster"] == "main"
    for workload in Workload.objects.filter(tenant=vision_on_east):
        post(f"/api/v1/workloads/{workload.pk}/stop/", headers)


def test_the_project_lives_on_every_cluster_it_may_use(vision_on_east, api_headers):
    east = Kube(cluster="east")
    namespace = vision_on_east.namespace
    assert tenant_clusters_reconcile(tenant_id=vision_on_east.pk) == {"east": "provisioned"}
    assert east.get("Namespace", namespace) is not None
    assert east.get("ResourceQuota", "gpu-portal-quota", namespace) is not None
    assert east.list("NetworkPolicy", namespace)["items"]
    # drift made by hand on east is put back, and said
    east.patch("ResourceQuota", "gpu-portal-quota",
               {"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}}, namespace)
    assert tenant_clusters_reconcile(tenant_id=vision_on_east.pk) == {"east": "drifted"}
    row = TenantCluster.objects.get(tenant=vision_on_east, cluster__name="east")
    assert row.state == "drifted" and "ResourceQuota" in row.reason
    quota = east.get("ResourceQuota", "gpu-portal-quota", namespace)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"
    states = Client().get(f"/api/v1/tenants/{vision_on_east.pk}/",
                          **api_headers("admin", "admin")).json()["cluster_states"]
    assert [(s["cluster"], s["state"]) for s in states] == [("main", "provisioned"),
                                                            ("east", "drifted")]
    # east does not answer: recorded, not tried
    Cluster.objects.filter(name="east").update(state="unreachable", reason="timed out")
    assert tenant_clusters_reconcile(tenant_id=vision_on_east.pk) == {"east": "unreachable"}
    assert "timed out" in TenantCluster.objects.get(pk=row.pk).reason
    # east comes back: every project is reconciled at once, and what went meanwhile is back
    east.delete("ResourceQuota", "gpu-portal-quota", namespace)
    with TestCase.captureOnCommitCallbacks(execute=True):
        probed = cluster_probe_one(cluster_id=row.cluster_id)
    assert probed is not None and probed.state == "ready"
    assert east.get("ResourceQuota", "gpu-portal-quota", namespace) is not None
    assert TenantCluster.objects.get(pk=row.pk).state == "provisioned"
    # off the project's list: its namespace goes from east
    tenant_clusters_set(tenant=vision_on_east, acting_user=None, names=["main"])
    assert tenant_clusters_reconcile(tenant_id=vision_on_east.pk) == {"east": "removed"}
    assert not TenantCluster.objects.filter(tenant=vision_on_east).exists()
    eventually(lambda: east.get("Namespace", namespace) is None, timeout=20,
               message="the namespace is still on east")
