"""Scraping kubesim's real /metrics while workloads run there (discovery case 3)."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase
from kubernetes import client as k8s

from kube.client import Kube
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.waiting import eventually
from usage.models import GpuDevice, GpuSample, ScrapeTarget
from usage.scrape import discover_targets
from usage.services import usage_scrape
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision(login, gpu_types, cluster, eager_celery):
    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0}})
    tenant_reconcile(tenant_id=tenant.pk)
    return tenant


def launch(token: str, body: dict) -> Workload:
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = Client().post("/api/v1/workloads/", body, content_type="application/json",
                                 HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


def wait_for_gpus(kube: Kube, namespace: str, prefix: str, count: int) -> None:
    """Until kubesim's metrics show `count` GPUs held by pods named `prefix…`."""
    def held() -> set[str]:
        text = kube.server_get("/metrics").decode()
        return {line.split('UUID="', 1)[1].split('"', 1)[0] for line in text.splitlines()
                if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and f'namespace="{namespace}"' in line
                and f'pod="{prefix}' in line}

    eventually(lambda: len(held()) >= count, timeout=20, message="the pods never got their GPUs")


def test_kubesim_metrics_become_samples_of_the_right_workload(vision, project_token, cluster):
    kube = Kube(cluster.api_client())
    assert discover_targets(kube)[0].source == "kubesim"
    token = project_token("researcher", "vision-lab")
    notebook = launch(token, {"name": "nb", "template": "jupyter", "gpu_type": "a100",
                              "gpu_count": 2})
    other = launch(token, {"name": "tb", "template": "jupyter", "gpu_type": "v100",
                           "gpu_count": 1})
    wait_for_gpus(kube, vision.namespace, notebook.object_name, 2)
    wait_for_gpus(kube, vision.namespace, other.object_name, 1)

    report = usage_scrape(kube=kube)

    assert report.targets == 1 and report.failed == 0 and report.garbage == 0
    mine = GpuSample.objects.filter(workload=notebook)
    assert mine.count() == 2
    assert {s.tenant_id for s in mine} == {vision.pk}
    assert all(s.pod.startswith(notebook.object_name + "-") and s.namespace == vision.namespace
               for s in mine)
    assert all(s.memory_total_mib > 70000 and 0 <= s.util <= 100 for s in mine)
    assert GpuSample.objects.filter(workload=other).count() == 1
    # free GPUs are stored with no workload; every visible GPU has a device row
    assert GpuSample.objects.filter(workload__isnull=True, pod="").exists()
    devices = GpuDevice.objects.count()
    # the demo inventory: 2×8 + 2×4 + 1×4 whole GPUs, the time-sliced node's 4 T4s (one series
    # each while no pod holds a replica) and the MIG node's 2 × 7 instances
    assert devices == report.devices == 28 + 4 + 14
    held = GpuDevice.objects.filter(last_workload=notebook)
    assert held.count() == 2 and all(d.node.startswith("gpu-a100-") for d in held)
    target = ScrapeTarget.objects.get()
    assert target.source == "kubesim" and target.last_error == "" and target.last_samples > 0

    # a second cycle in the same second is the same samples: nothing new stored
    again = usage_scrape(kube=kube, now=GpuSample.objects.latest("at").at)
    assert again.samples == 0 and GpuSample.objects.filter(workload=notebook).count() == 2
    assert GpuDevice.objects.count() == devices


def test_gpus_of_pods_that_are_no_workload_are_counted_and_skipped(vision, cluster,
                                                                  kube_namespace):
    kube = Kube(cluster.api_client())
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stray-trainer", "namespace": kube_namespace},
        "spec": {"nodeSelector": {"gputype": "t4"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                 "containers": [{"name": "c", "image": "busybox:1.36",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }
    k8s.CoreV1Api(cluster.api_client()).create_namespaced_pod(kube_namespace, pod)
    wait_for_gpus(kube, kube_namespace, "stray-trainer", 1)

    report = usage_scrape(kube=kube)

    assert report.unknown_pods >= 1
    assert not GpuSample.objects.filter(pod="stray-trainer").exists()
    device = GpuDevice.objects.get(last_pod="stray-trainer")
    assert device.last_namespace == kube_namespace and device.last_workload is None
    assert ScrapeTarget.objects.get().unknown_pods_total >= 1
