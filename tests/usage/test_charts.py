"""The workload page's GPU chart: its JSON endpoint (samples, rollups, tenant visibility), the
chart element and the npm assets on the page; the admin's GPU dashboard."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone

from tenants.models import Tenant
from tests.fixtures.factories import make_workload
from usage.services import samples_insert, usage_rollup
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def notebook(login, gpu_types) -> Workload:
    """A running 2-GPU workload of vision-lab with five scrapes of samples (no cluster)."""
    login("researcher")  # records vision-lab and nlp-lab
    login("student")
    now = timezone.now().replace(microsecond=0)
    workload = make_workload(Tenant.objects.get(name="vision-lab"), "researcher", name="nb",
                             gpu_count=2, image="x:1",
                             started_at=now - dt.timedelta(minutes=30))
    rows = []
    for i in range(5):
        at = now - dt.timedelta(seconds=15 * (4 - i))
        for gpu, util in ((0, 90.0 + i), (1, 10.0 + i)):
            rows.append((at, "gpu-a100-1", gpu, f"GPU-{gpu}", "", workload.pk,
                         workload.tenant_id, workload.tenant.namespace,
                         f"{workload.object_name}-abc", util, 2048 * (gpu + 1), 81920, 40.0,
                         250.0, 0, 0, ""))
    samples_insert(rows=rows)
    return workload


def test_the_chart_endpoint_returns_the_series(notebook, as_user):
    client = as_user("researcher")

    response = client.get(f"/workloads/{notebook.pk}/gpu-usage/")

    assert response.status_code == 200
    data = response.json()
    assert data["source"] == "samples" and data["gpu_count"] == 2
    assert len(data["t"]) == 5 and data["t"] == sorted(data["t"])
    assert data["util_avg"] == [50.0, 51.0, 52.0, 53.0, 54.0]  # the mean of its two GPUs
    assert data["util_max"][-1] == 94.0
    assert data["memory_used_mib"] == [3072.0] * 5 and data["memory_total_mib"] == 81920
    assert data["refresh_seconds"] > 0  # running: the page asks again


def test_long_ranges_come_from_rollups(notebook, as_user):
    usage_rollup(since=timezone.now() - dt.timedelta(minutes=10))
    data = as_user("researcher").get(
        f"/workloads/{notebook.pk}/gpu-usage/?minutes=1440").json()
    assert data["source"] == "minute rollups" and data["t"]
    assert all(0 <= u <= 100 for u in data["util_avg"])


def test_the_page_has_the_chart(notebook, as_user):
    page = as_user("researcher").get(f"/workloads/{notebook.pk}/").content.decode()

    assert 'data-gpu-chart' in page
    assert f'data-url="/workloads/{notebook.pk}/gpu-usage/"' in page
    assert "/static/vendor/uplot/uPlot.iife.min.js" in page and "/static/js/charts.js" in page
    # every script and style sheet comes from the portal itself (a path, never another host)
    assets = re.findall(r'<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]*)"', page)
    assert assets and all(a.startswith("/") and not a.startswith("//") for a in assets), assets
    # the assets are served from npm's install (node_modules), not fetched from anywhere
    assert finders.find("vendor/uplot/uPlot.iife.min.js")
    assert finders.find("vendor/uplot/uPlot.min.css") and finders.find("js/charts.js")


def test_another_tenants_workload_is_404(notebook, as_user):
    student = as_user("student", "nlp-lab")
    assert student.get(f"/workloads/{notebook.pk}/gpu-usage/").status_code == 404
    assert student.post(f"/workloads/{notebook.pk}/still-needed/").status_code == 404
    # the researcher too, while nlp-lab is the current project
    other = as_user("researcher", "nlp-lab")
    assert other.get(f"/workloads/{notebook.pk}/gpu-usage/").status_code == 404
    # signed out: the login page
    assert Client().get(f"/workloads/{notebook.pk}/gpu-usage/").status_code == 302


def test_the_admin_dashboard(notebook, login, settings):
    settings.KUBECONFIG = "/nonexistent/kubeconfig"  # the cluster does not answer: a banner
    admin = login("admin")
    page = admin.get("/admin/gpus/").content.decode()
    assert 'id="gpu-capacity"' in page and 'id="cluster-note"' in page
    assert '<tr data-gpu-type="a100">' in page
    assert 'data-col="allocated">2<' in page  # the notebook's two GPUs
    assert 'data-col="used">1.04<' in page  # (mean 92 % + mean 12 %) / 100, in GPUs
    assert 'id="tenant-allocations"' in page and "vision-lab" in page
    assert 'id="idle-gpus"' in page
    assert login("researcher").get("/admin/gpus/").status_code == 403


def test_the_api_gives_a_workloads_gpu_hours_and_series(notebook, project_token):
    usage_rollup(since=timezone.now() - dt.timedelta(minutes=10))
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    body = Client().get(f"/api/v1/workloads/{notebook.pk}/usage/?minutes=15", **headers).json()
    assert body["workload"] == notebook.pk and body["gpu_count"] == 2
    assert body["source"] == "samples" and len(body["t"]) == 5
    assert body["util_max"][-1] == 94.0 and body["util_avg"][-1] == 54.0  # (94 + 14) / 2
    assert body["gpu_hours_allocated"] > 0
    assert 0 < body["gpu_hours_used"] < body["gpu_hours_allocated"]
    other = {"HTTP_X_AUTH_TOKEN": project_token("student", "nlp-lab")}
    assert Client().get(f"/api/v1/workloads/{notebook.pk}/usage/", **other).status_code == 404


def test_device_level_figures_are_marked_on_the_chart(login, gpu_types, as_user):
    """A workload on a time-sliced GPU whose samples are the whole GPU's: the chart's JSON says
    so and the page has the place where the chart shows it."""
    login("researcher")
    now = timezone.now().replace(microsecond=0)
    workload = make_workload(Tenant.objects.get(name="vision-lab"), "researcher", name="nbs",
                             gpu_count=1, image="x:1", started_at=now - dt.timedelta(minutes=30))
    rows = [(now - dt.timedelta(seconds=15 * i), "gpu-t4-shared-1", 0, "GPU-t4", "",
             workload.pk, workload.tenant_id, workload.tenant.namespace,
             f"{workload.object_name}-abc", 70.0, 2048, 15360, 40.0, 50.0, 0, 0, "device")
            for i in range(3)]
    samples_insert(rows=rows)
    client = as_user("researcher")

    data = client.get(f"/workloads/{workload.pk}/gpu-usage/").json()
    assert data["device_level"] is True
    assert data["scope_note"].startswith("device-level: shared with other pods")
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "data-chart-scope" in page


def test_a_workloads_own_figures_carry_no_device_level_note(notebook, as_user):
    data = as_user("researcher").get(f"/workloads/{notebook.pk}/gpu-usage/").json()
    assert data["device_level"] is False and data["scope_note"] == ""
