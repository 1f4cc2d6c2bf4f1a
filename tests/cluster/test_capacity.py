"""The capacity view comes from the read model: a warm cache answers GET gpu-types/ without
asking the cluster, counts pods the portal did not create, and counts an admitted workload once
(from the database until its pod is bound, then from the pod)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from catalogue.models import Template
from cluster.cache import cluster_cache
from kube.client import Kube, api_client
from kube.labels import LABEL_WORKLOAD_ID
from tenants.models import Tenant
from tests.fixtures.kubesim import DEMO_INVENTORY
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim(kubesim_factory, settings):
    server = kubesim_factory(inventory=DEMO_INVENTORY)
    settings.KUBECONFIG = str(server.kubeconfig)
    yield server
    server.stop()


def counted(kubeconfig: str) -> list[str]:
    """Every request the portal's own connection to this cluster makes from now on."""
    client = api_client(kubeconfig)
    calls: list[str] = []
    original = client.rest_client.request

    def request(method, url, *args, **kwargs):
        calls.append(f"{method} {url.split('//', 1)[-1].split('/', 1)[-1]}")
        return original(method, url, *args, **kwargs)

    client.rest_client.request = request
    return calls


def pod(name: str, gpus: int, *, workload_id: int | None = None) -> dict:
    labels = {LABEL_WORKLOAD_ID: str(workload_id)} if workload_id else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeSelector": {"gputype": "a100"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def bound(name: str):
    def check(cache) -> bool:
        return any(p.name == name and p.node_name for p in cache.pods.items())
    return check


def test_gpu_types_from_a_warm_cache_ask_the_cluster_nothing(sim, login, gpu_types):
    client = login("researcher")
    kube = Kube(sim.api_client())
    if kube.get("Namespace", "default") is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    first = {r["slug"]: r for r in client.get("/api/v1/gpu-types/").json()}
    assert first["a100"]["capacity"] == 16 and first["a100"]["free"] == 16

    # a pod the portal did not create holds 2 a100s
    kube.create(pod("burn-in", 2))
    assert cluster_cache().wait_for(bound("burn-in"))
    calls = counted(str(sim.kubeconfig))
    for _ in range(5):
        rows = {r["slug"]: r for r in client.get("/api/v1/gpu-types/").json()}
        assert rows["a100"]["allocated"] == 2 and rows["a100"]["free"] == 14
        assert rows["a100"]["largest_free_block"] == 8  # the other a100 node is untouched
    # the reflectors' own watches may be re-opened meanwhile; nothing else went out
    assert [c for c in calls if "watch=true" not in c] == []

    # an admitted workload counts at once, from the database ...
    workload = Workload.objects.create(
        tenant=Tenant.objects.get(name="vision-lab"),
        owner=get_user_model().objects.get(name="researcher"), name="training",
        template=Template.objects.get(slug="custom"), kind="batch", gpu_type=gpu_types["a100"],
        gpu_count=4, image="nvcr.io/nvidia/pytorch:24.01-py3", cpu=4, memory_gb=16,
        state=Workload.State.CREATING)
    rows = {r["slug"]: r for r in client.get("/api/v1/gpu-types/").json()}
    assert rows["a100"]["allocated"] == 2 and rows["a100"]["free"] == 10
    # ... and once its pod is bound, from the pod only: not twice
    kube.create(pod("training", 4, workload_id=workload.pk))
    assert cluster_cache().wait_for(bound("training"))
    rows = {r["slug"]: r for r in client.get("/api/v1/gpu-types/").json()}
    assert rows["a100"]["allocated"] == 6 and rows["a100"]["free"] == 10
    assert [c for c in calls if "watch=true" not in c] == []


def test_a_cluster_that_never_answered_gives_null_figures(kubesim_factory, settings, login,
                                                          gpu_types):
    gone = kubesim_factory()
    settings.KUBECONFIG = str(gone.kubeconfig)
    gone.stop()
    rows = {r["slug"]: r for r in login("researcher").get("/api/v1/gpu-types/").json()}
    assert rows["a100"]["capacity"] is None and rows["a100"]["free"] is None
    assert rows["a100"]["name"] == "NVIDIA A100 80GB"
