"""The portal's own /metrics: requests by route and status, launches, refusals, task failures,
the token cache."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase
from prometheus_client.parser import text_string_to_metric_families

from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update

pytestmark = pytest.mark.django_db


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_are_counted_and_timed_by_route_and_status(keystone, project_token):
    token = project_token("researcher", "vision-lab")
    before = scrape()
    client = Client()
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    assert client.get("/api/v1/me/").status_code == 401
    assert client.get("/api/v1/workloads/999999/", HTTP_X_AUTH_TOKEN=token).status_code == 404
    assert client.get("/no/such/page/").status_code == 404
    after = scrape()
    for route, status in (("api:me", "200"), ("api:me", "401"), ("api:workload-detail", "404"),
                          ("unmatched", "404")):
        labels = {"method": "GET", "route": route, "status": status}
        assert value(after, "portal_http_requests_total", **labels) == \
            value(before, "portal_http_requests_total", **labels) + 1, labels
    count = value(after, "portal_http_request_duration_seconds_count", method="GET",
                  route="api:me")
    assert count >= 2
    # the token cache's own counter is exposed too (one miss, then hits for the same token)
    assert value(after, "portal_keystone_token_cache_total", result="miss") >= 1
    assert value(after, "portal_keystone_token_cache_total", result="hit") >= 1


def test_launches_and_admission_refusals_are_counted(login, gpu_types, cluster, project_token):
    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 1, "gpus_by_type": {"a100": 1, "v100": 0, "t4": 0}})
    tenant_reconcile(tenant_id=tenant.pk)
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    body = {"name": "m", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
    before = scrape()
    for expected in (201, 403):
        with TestCase.captureOnCommitCallbacks(execute=False):
            response = Client().post("/api/v1/workloads/", body, content_type="application/json",
                                     **headers)
        assert response.status_code == expected, response.json()
    after = scrape()
    launched = {"template": "jupyter", "gpu_type": "a100"}
    assert value(after, "portal_workload_launches_total", **launched) == \
        value(before, "portal_workload_launches_total", **launched) + 1
    assert value(after, "portal_admission_refusals_total", gpu_type="a100") == \
        value(before, "portal_admission_refusals_total", gpu_type="a100") + 1


def test_failed_celery_tasks_are_counted_across_processes(eager_celery):
    @eager_celery.task(name="tests.metrics.always_fails")
    def always_fails():
        raise RuntimeError("boom")

    before = value(scrape(), "portal_celery_task_failures_total", task="tests.metrics.always_fails")
    result = always_fails.apply()
    assert result.failed()
    after = value(scrape(), "portal_celery_task_failures_total", task="tests.metrics.always_fails")
    assert after == before + 1


def test_metrics_need_no_credentials_and_no_database_rows():
    assert Client().get("/metrics").status_code == 200
