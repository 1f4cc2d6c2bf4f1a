"""`make demo CLUSTER=kube` registers its worker: seed_demo --cluster east=KUBECONFIG makes east a
cluster of the portal offering h100, the catalogue's h100 with the demo projects' quota of it,
and the projects' namespaces there; a restart changes nothing (east is the second kubesim,
conftest.py)."""

import io

import pytest
from django.core.management import call_command
from django.test import Client, TestCase

from clusters.models import Cluster
from clusters.services import cluster_probe_one
from kube.client import Kube
from tenants.models import Tenant
from tests.support.cluster import cluster_objects_of_the_test

pytestmark = pytest.mark.django_db


def test_the_demo_registers_east_with_its_h100s(keystone, cluster, east, eager_celery,
                                                 api_headers):
    with cluster_objects_of_the_test(east.api_client, timeout=30):
        for _ in range(2):  # a restart of the demo registers nothing twice
            with TestCase.captureOnCommitCallbacks(execute=True):
                call_command("seed_demo", "--cluster", f"east={east.kubeconfig}",
                             stdout=io.StringIO())
        (row,) = Cluster.objects.filter(home=False)
        assert (row.name, row.gpu_types, row.kubeconfig_path) == ("east", ["h100"],
                                                                   east.kubeconfig)
        assert cluster_probe_one(cluster_id=row.pk).state == "ready"
        vision = Tenant.objects.get(name="vision-lab")
        assert vision.quota.gpus_by_type()["h100"] == 8
        # every project's namespace on east too
        assert Kube(cluster="east").get("Namespace", vision.namespace) is not None
        headers = api_headers("researcher")
        types = {t["slug"]: t for t in Client().get("/api/v1/gpu-types/", **headers).json()}
        assert types["h100"]["clusters"] == {"east": {"capacity": 16, "free": 16}}
        clusters = Client().get("/api/v1/clusters/", **headers).json()
        assert [(c["name"], c["gpu_types"]) for c in clusters][1] == ("east", {"h100": 16})
