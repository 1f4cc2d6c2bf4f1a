"""GPU usage and idle culling on the real control plane: a notebook whose pod runs the idle GPU
workload (the `kubesim.io/gpu-trace: idle` annotation, which the KWOK nodes' agents honour) is
scraped from the gpuagents through PORTAL_GPU_EXPORTER_URLS, warned, and stopped; its objects are
deleted from the real API server. Scrape times are back-dated (usage_scrape(now=…)) so that a
two-minute idle window passes in seconds, as in tests/usage/test_culling.py. Two notebooks on
the time-sliced T4 node and one on the MIG A100 node, end to end (counting, charts, culling),
are that module's test, collected here against the KWOK nodes and their agents."""

from __future__ import annotations

import dataclasses
import datetime as dt
import urllib.request

import pytest
from django.utils import timezone

from kube.client import Kube
from stack.k8s.addons import addon
from tenants.models import Quota, Tenant
from tests.fixtures.factories import make_workload
from tests.support.culling import IDLE_TRACE, actions, check
from tests.support.waiting import eventually
from tests.usage.test_culling import (  # noqa: F401 - collected here, against the real cluster
    test_two_notebooks_on_a_time_sliced_t4_and_one_on_a_mig_slice_end_to_end,
)
from tests.workloads.api_calls import vision_lab_ready
from usage.models import GpuSample, WorkloadIdle
from usage.services import usage_scrape
from workloads.manifests import workload_objects
from workloads.models import Workload
from workloads.objects import workload_spec

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]


@pytest.fixture
def vision(login, gpu_types, cluster, eager_celery) -> Tenant:
    tenant = vision_lab_ready(login)
    Quota.objects.filter(tenant=tenant).update(idle_threshold_percent=5, idle_minutes=2,
                                               idle_action=Quota.IdleAction.STOP,
                                               idle_grace_minutes=1)
    return Tenant.objects.select_related("quota").get(pk=tenant.pk)


def agents_text(real_cluster) -> str:
    text = ""
    for url in addon(real_cluster, "gpumetrics").urls:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text += resp.read().decode()
    return text


def test_an_idle_notebook_is_scraped_warned_and_stopped(vision, real_cluster):
    now = timezone.now().replace(microsecond=0)
    workload = make_workload(vision, "researcher", name="idle-nb",
                             started_at=now - dt.timedelta(minutes=10))
    kube = Kube()  # the portal's ServiceAccount
    for obj in workload_objects(dataclasses.replace(workload_spec(workload),
                                                    pod_annotations=IDLE_TRACE)):
        kube.create(obj)
    eventually(lambda: f'pod="{workload.object_name}-' in agents_text(real_cluster),
               timeout=30, interval=0.3, message="the idle pod's GPU never showed in its agent")

    for seconds in (150, 120, 90, 60, 30, 0):
        usage_scrape(now=now - dt.timedelta(seconds=seconds))
    samples = GpuSample.objects.filter(workload=workload)
    assert samples.count() == 6 and all(s.util < 2 for s in samples)
    assert {s.uuid for s in samples} and all(
        s.node.startswith("gpu-a100-") for s in samples)

    report = check(now)
    assert report.warned == 1 and report.stopped == 0
    assert WorkloadIdle.objects.get(workload=workload).stop_at == now + dt.timedelta(minutes=1)

    for seconds in (60, 75):
        usage_scrape(now=now + dt.timedelta(seconds=seconds))
    report = check(now + dt.timedelta(seconds=75))
    assert report.stopped == 1
    workload.refresh_from_db()
    assert workload.state in (Workload.State.STOPPING, Workload.State.STOPPED)
    assert actions(workload)[:3] == ["workload.idle_warn", "workload.idle_stop", "workload.stop"]
    # the stop task (eager) deleted its objects through the real API server
    assert not kube.list("Deployment", vision.namespace,
                         label_selector=f"gpu-portal.io/workload-id={workload.pk}")["items"]
