"""Queueing on the control plane with Kueue: the portal pointed at it, tenants provisioned in
its cohort, launches through admission; what a test made there is gone before the next."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from catalogue.models import Template
from kube.client import Kube
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update, tenant_ensure
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.tracking import state_of
from workloads.models import Workload
from workloads.services import workload_launch
from workloads.tasks import workload_create_task


@pytest.fixture
def queued_cluster(kueue_cluster, settings, gpu_types) -> Iterator:
    settings.KUBECONFIG = str(kueue_cluster.portal_kubeconfig)
    settings.PORTAL_QUEUEING = "auto"  # detected: the cluster serves Kueue's API
    made: list = []
    # a ClusterQueue left lends its quota to the next test's cohort until it is gone
    with cluster_objects_of_the_test(kueue_cluster.api_client, timeout=90):
        yield made


def make_tenant(made: list, *, a100: int, borrowing: int | None = None, weight: str = "1"):
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"team-{len(made)}")
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": 16, "max_workloads": 10, "cpu": 64, "memory_gb": 256,
        "gpus_by_type": {"a100": a100, "v100": 0, "t4": 0}, "gpu_borrowing_limit": borrowing,
        "fair_share_weight": weight})
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    made.append(tenant)
    return tenant


def launch(tenant, user, gpu_types, *, name: str, gpus: int, run_seconds: int = 600,
           max_runtime: int | None = None, **more) -> Workload:
    """The portal's own launch (admission), and its create task run here; `more`: more of the
    request, as validation hands it over (a ResolvedCheckpoint as `checkpoint`)."""
    request = {"template": Template.objects.get(slug="custom"), "name": name, "kind": "batch",
               "gpu_type": gpu_types["a100"], "gpu_count": gpus, "image": "busybox:1.36",
               "env": {"KUBESIM_RUN_SECONDS": str(run_seconds)}, "cpu": 1, "memory": 1,
               "max_runtime_minutes": max_runtime, **more}
    workload, _ = workload_launch(tenant=tenant, user=user, request=request)
    workload_create_task(workload.pk)
    return state_of(workload)


def nominal_a100(kube: Kube, tenant) -> str:
    """The tenant's ClusterQueue's nominal quota of the a100 flavor, as the API server has it."""
    queue = kube.get("ClusterQueue", tenant.namespace)
    gpus = queue["spec"]["resourceGroups"][1]["flavors"]
    return next(f for f in gpus if f["name"] == "gpu-a100")["resources"][0]["nominalQuota"]
