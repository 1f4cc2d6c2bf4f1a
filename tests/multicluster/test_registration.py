"""A worker registered by an admin through the portal, on two real control planes
(tests/fixtures/multicluster.py): the home cluster's MultiKueue objects for it (its kubeconfig
Secret, MultiKueueCluster, config and check, the tenants' queues dispatching to it) are made at
once, through the portal's own identities on both clusters, and Kueue connects with them; a
job dispatched there runs; disabling the worker removes them all."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.test import Client, TestCase

from kube import multikueue
from kube.client import Kube
from stack.k8s.multikueue import cluster_active, register_workers
from tenants.models import Tenant
from tenants.services import quota_update
from tests.support.multicluster import EAST, job, portal_on_manager
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, post
from workloads.models import Workload

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300),
              pytest.mark.usefixtures("eager_celery")]

CHECK = multikueue.check_name(EAST)


def east_on_manager(kube: Kube) -> dict[str, bool]:
    """Which of east's MultiKueue objects the manager has."""
    return {
        "Secret": kube.get("Secret", multikueue.secret_name(EAST),
                           multikueue.KUEUE_NAMESPACE) is not None,
        "MultiKueueCluster": kube.get("MultiKueueCluster", EAST) is not None,
        "MultiKueueConfig": kube.get("MultiKueueConfig", CHECK) is not None,
        "AdmissionCheck": kube.get("AdmissionCheck", CHECK) is not None,
    }


@pytest.fixture
def unregistered(multi_cluster, settings, gpu_types, login) -> Iterator[Any]:
    """The portal on the manager, east not known to it nor to the manager's Kueue (the
    objects the pair started with removed); put back as they were after the test."""
    with portal_on_manager(multi_cluster, settings) as stack:
        stack.callback(register_workers, multi_cluster.manager, {EAST: multi_cluster.east})
        with multi_cluster.manager.api_client() as api:
            kube = Kube(api)
            for kind, name, namespace in (
                    ("AdmissionCheck", CHECK, None), ("MultiKueueConfig", CHECK, None),
                    ("MultiKueueCluster", EAST, None),
                    ("Secret", multikueue.secret_name(EAST), multikueue.KUEUE_NAMESPACE)):
                kube.delete(kind, name, namespace)
            eventually(lambda: not any(east_on_manager(kube).values()), timeout=30,
                       message=lambda: f"east's objects on the manager: {east_on_manager(kube)}")
        login("researcher")  # vision-lab becomes a tenant
        tenant = Tenant.objects.get(name="vision-lab")
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": 4, "max_workloads": 10, "cpu": 64, "memory_gb": 256,
            "gpus_by_type": {"h100": 4, "a100": 0, "v100": 0, "t4": 0}})
        yield multi_cluster


def admin_send(method: str, path: str, headers: dict, body: dict | None = None) -> Any:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return getattr(Client(), method)(path, body, content_type="application/json", **headers)


def test_registering_a_worker_makes_its_multikueue_objects_and_disabling_removes_them(
        unregistered, api_headers):
    admin = api_headers("admin", "admin")
    namespace = Tenant.objects.get(name="vision-lab").namespace
    answer = admin_send("post", "/api/v1/clusters/", admin, {
        "name": EAST, "kubeconfig_path": str(unregistered.east.portal_kubeconfig),
        "gpu_types": ["h100"]})
    assert answer.status_code == 201, answer.json()
    with unregistered.manager.api_client() as api:
        manager = Kube(api)
        # made at once, from the registration (its task), not by an operator
        assert east_on_manager(manager) == dict.fromkeys(east_on_manager(manager), True)
        secret = manager.get("Secret", multikueue.secret_name(EAST), multikueue.KUEUE_NAMESPACE)
        kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        (user,) = kubeconfig["users"]
        assert set(user["user"]) == {"token"}  # the manager's own narrow identity's token
        assert kubeconfig["clusters"][0]["cluster"]["server"] == unregistered.east.url
        # Kueue connects with it
        eventually(lambda: cluster_active(unregistered.manager, EAST), timeout=60,
                   message="the manager's Kueue did not connect to east with that kubeconfig")
        assert CHECK in [c["name"] for c in manager.get(
            "ClusterQueue", f"{namespace}-{EAST}")["spec"]["admissionChecksStrategy"][
                "admissionChecks"]]
        assert manager.get("LocalQueue", f"gpu-portal-{EAST}", namespace) is not None

    # a job launched there runs there
    researcher = api_headers("researcher")
    launched = launch(researcher, job("after-registering", run_seconds=3))
    assert launched.status_code == 201 and launched.json()["cluster"] == EAST, launched.json()
    workload_id = launched.json()["id"]
    with unregistered.east.api_client() as api:
        east = Kube(api)
        eventually(lambda: east.list("Pod", namespace, label_selector=(
            f"gpu-portal.io/workload-id={workload_id}"))["items"], timeout=60,
            message="no pod of the job on east")
    assert post(f"/api/v1/workloads/{workload_id}/stop/", researcher).status_code == 202
    with unregistered.manager.api_client() as api:
        manager = Kube(api)
        eventually(lambda: not manager.list("Workload", namespace)["items"], timeout=60,
                   message="the stopped job's Workload is still on the manager")

        disabled = admin_send("patch", f"/api/v1/clusters/{EAST}/", admin, {"enabled": False})
        assert disabled.status_code == 200, disabled.json()
        eventually(lambda: not any(east_on_manager(manager).values())
                   and manager.get("ClusterQueue", f"{namespace}-{EAST}") is None
                   and manager.get("LocalQueue", f"gpu-portal-{EAST}", namespace) is None,
                   timeout=60, message=lambda: f"left on the manager: {east_on_manager(manager)}")
        # the tenant's own queue at home is untouched
        assert manager.get("ClusterQueue", namespace) is not None
    assert Workload.objects.get(pk=workload_id).cluster == EAST
