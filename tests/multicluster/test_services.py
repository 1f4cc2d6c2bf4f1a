"""A service the portal places on the worker `east` (tests/fixtures/multicluster.py): the portal
runs beside the manager as its own least-privilege ServiceAccount, reaches east as the
ServiceAccount east gives it (the Cluster row's kubeconfig), and places a notebook of a type
only east has there: its namespace made on east, its Deployment admitted by east's Kueue and
run on an east node, its address from east's own MetalLB, followed by a tracker of east. East
taken down shows it `unknown` (never failed), and it is running again once east answers; a stop
and a delete remove its objects from east."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from clusters.models import Cluster
from clusters.services import cluster_probe_one, cluster_register
from kube.client import Kube
from tenants.models import Tenant, TenantCluster
from tenants.services import quota_update
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.journeys import track_until
from tests.support.multicluster import worker_back
from tests.support.waiting import eventually
from tests.workloads.api_calls import delete, launch, post, vision_lab_ready
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(600),
              pytest.mark.usefixtures("eager_celery")]

NOTEBOOK = {"name": "nb on east", "template": "jupyter", "gpu_type": "h100", "gpu_count": 1}


@pytest.fixture
def portal_on_manager(multi_cluster, settings, login, gpu_types) -> Iterator[Tenant]:
    """The portal beside the manager, east registered (its portal kubeconfig), vision-lab with
    H100 quota; what the test made on either cluster is gone after it."""
    from catalogue.models import GpuType
    from cluster.addresses import address_pools_forget

    settings.KUBECONFIG = str(multi_cluster.manager.portal_kubeconfig)
    address_pools_forget()
    GpuType.objects.create(slug="h100", name="NVIDIA H100 80GB", memory_gb=80,
                           node_selector={"gputype": "h100"})
    with contextlib.ExitStack() as stack:
        for cp in (multi_cluster.east, multi_cluster.manager):
            stack.enter_context(cluster_objects_of_the_test(cp.api_client, timeout=120))
        root, _ = get_user_model().objects.get_or_create(username="root")
        east = cluster_register(user=root, fields={
            "name": "east", "kubeconfig_path": str(multi_cluster.east.portal_kubeconfig),
            "gpu_types": ["h100"]})
        probed = cluster_probe_one(cluster_id=east.pk)
        assert probed is not None and probed.state == "ready", probed and probed.reason
        tenant = vision_lab_ready(login)
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": 10, "gpus_by_type": {"a100": 4, "v100": 4, "h100": 2}})
        yield tenant


def east_objects(multi_cluster, namespace: str, workload_id: int) -> list[str]:
    selector = f"gpu-portal.io/workload-id={workload_id}"
    with multi_cluster.east.api_client() as api:
        kube = Kube(api)
        return [f"{kind} {o['metadata']['name']}" for kind in ("Deployment", "Service", "Pod")
                for o in kube.list(kind, namespace, label_selector=selector)["items"]]


def test_a_notebook_on_the_worker_runs_with_its_address_and_survives_its_outage(
        multi_cluster, portal_on_manager, api_headers):
    headers = api_headers("researcher")
    namespace = portal_on_manager.namespace
    response = launch(headers, NOTEBOOK)
    assert response.status_code == 201, response.json()
    assert response.json()["cluster"] == "east"  # the only cluster with H100s
    workload_id = response.json()["id"]
    assert TenantCluster.objects.get(tenant=portal_on_manager, cluster__name="east").state == \
        "provisioned"

    workload = track_until(workload_id, lambda w: w.state == "running" and w.address,
                           timeout=90, cluster="east")
    assert workload.node.startswith("east-gpu-h100-")
    assert workload.address.startswith("192.168.2.")  # east's MetalLB pool
    shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
    assert shown["state"] == "running" and shown["url"] == workload.url
    with multi_cluster.manager.api_client() as api:  # nothing of it on the manager
        assert Kube(api).list("Pod", namespace)["items"] == []

    east_cp = multi_cluster.east
    east_cp.stop_component("kube-apiserver")
    try:
        down = cluster_probe_one(cluster_id=Cluster.objects.get(name="east").pk)
        assert down is not None and down.state == "unreachable"
        # the tracker of east meets the outage: nothing it judged is failed for it
        Tracker(cluster="east").run_for(2.0)
        assert Workload.objects.get(pk=workload_id).state == "running"
        shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
        assert shown["state"] == "unknown"
        assert "The cluster east does not answer" in shown["reason"]
        # a new launch of the type is not sent to it: no other cluster has H100s
        refused = launch(headers, {**NOTEBOOK, "name": "nb two"})
        assert refused.status_code in (400, 409), refused.json()
        assert not Workload.objects.filter(name="nb two").exists()
    finally:
        worker_back(multi_cluster.manager, east_cp)
    up = cluster_probe_one(cluster_id=Cluster.objects.get(name="east").pk)
    assert up is not None and up.state == "ready", up and up.reason
    workload = track_until(workload_id, lambda w: w.state == "running", timeout=90,
                           cluster="east")
    shown = Client().get(f"/api/v1/workloads/{workload_id}/", **headers).json()
    assert shown["state"] == "running" and shown["address"] == workload.address

    stopped = post(f"/api/v1/workloads/{workload_id}/stop/", headers)
    assert stopped.status_code == 202, stopped.json()
    assert Workload.objects.get(pk=workload_id).state == "stopped"
    eventually(lambda: not east_objects(multi_cluster, namespace, workload_id), timeout=60,
               message=lambda: f"left on east: {east_objects(multi_cluster, namespace, workload_id)}")
    assert delete(f"/api/v1/workloads/{workload_id}/", headers).status_code == 204

