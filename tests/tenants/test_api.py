"""The tenants and quota API: visibility, validation, admin-only writes."""

import pytest
from django.test import Client

from audit.models import AuditRecord
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenants(login, gpu_types, cluster):
    """Tenants for the demo projects exist once someone has logged in."""
    login("researcher")
    return {t.name: t for t in Tenant.objects.all()}


def api(token: str) -> dict:
    return {"HTTP_X_AUTH_TOKEN": token}


def test_a_member_lists_only_their_tenants(tenants, project_token):
    body = Client().get("/api/v1/tenants/", **api(project_token("student", "nlp-lab"))).json()
    assert [t["name"] for t in body["results"]] == ["nlp-lab"]
    assert set(body["results"][0]) >= {"id", "keystone_project_id", "name", "namespace", "state"}


def test_an_admin_lists_every_tenant(tenants, project_token):
    body = Client().get("/api/v1/tenants/", **api(project_token("admin", "admin"))).json()
    assert {"vision-lab", "nlp-lab"} <= {t["name"] for t in body["results"]}


def test_another_tenant_is_404_not_403(tenants, project_token):
    other = tenants["vision-lab"].pk
    client, auth = Client(), api(project_token("student", "nlp-lab"))
    assert client.get(f"/api/v1/tenants/{other}/", **auth).status_code == 404
    assert client.get(f"/api/v1/tenants/{other}/quota/", **auth).status_code == 404
    assert client.patch(f"/api/v1/tenants/{other}/quota/", {"gpus_total": 1},
                        content_type="application/json", **auth).status_code == 404


def test_members_read_their_quota_but_cannot_write_it(tenants, project_token):
    tenant = tenants["nlp-lab"]
    auth = api(project_token("student", "nlp-lab"))
    quota = Client().get(f"/api/v1/tenants/{tenant.pk}/quota/", **auth).json()
    assert set(quota) == {"gpus_total", "gpus_by_type", "cpu", "memory", "max_workloads",
                          "max_runtime_minutes", "idle_threshold_percent", "idle_minutes",
                          "idle_action", "idle_grace_minutes", "allow_over_capacity",
                          "gpu_borrowing_limit", "gpu_lending_limit", "fair_share_weight",
                          "storage_gib", "volumes", "storage_by_class",
                          "in_force", "adjustments"}  # these two read only
    assert quota["gpus_by_type"] == {"a100": 1, "t4": 1, "v100": 1}
    # volumes: the site's defaults, in force as set (no adjustment changes storage)
    assert (quota["storage_gib"], quota["volumes"]) == (500, 10)
    assert (quota["in_force"]["storage_gib"], quota["in_force"]["volumes"]) == (500, 10)
    # queueing: no borrowing or lending limit until an admin sets one, an equal share
    assert (quota["gpu_borrowing_limit"], quota["gpu_lending_limit"],
            quota["fair_share_weight"]) == (None, None, "1.00")
    refused = Client().patch(f"/api/v1/tenants/{tenant.pk}/quota/", {"gpus_total": 1},
                             content_type="application/json", **auth)
    assert refused.status_code == 403
    assert refused.json()["code"] == "permission_denied"


def test_an_admin_changes_a_quota(tenants, project_token):
    tenant = tenants["vision-lab"]
    response = Client().patch(f"/api/v1/tenants/{tenant.pk}/quota/",
                              {"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4}},
                              content_type="application/json",
                              **api(project_token("admin", "admin")))
    assert response.status_code == 200, response.json()
    assert response.json()["gpus_total"] == 8
    assert response.json()["gpus_by_type"] == {"a100": 4, "t4": 1, "v100": 4}
    record = AuditRecord.objects.get(tenant=tenant, action="quota.update")
    assert record.actor_name == "admin"
    assert record.before["gpus_total"] == 2 and record.after["gpus_total"] == 8


def test_an_admin_sets_the_storage_quota(tenants, project_token):
    tenant = tenants["vision-lab"]
    url, auth = f"/api/v1/tenants/{tenant.pk}/quota/", api(project_token("admin", "admin"))
    response = Client().patch(url, {"storage_gib": 50, "volumes": 2},
                              content_type="application/json", **auth)
    assert response.status_code == 200, response.json()
    assert (response.json()["storage_gib"], response.json()["volumes"]) == (50, 2)
    assert response.json()["in_force"]["storage_gib"] == 50
    record = AuditRecord.objects.get(tenant=tenant, action="quota.update")
    assert (record.before["storage_gib"], record.after["storage_gib"]) == (500, 50)
    refused = Client().patch(url, {"volumes": -1}, content_type="application/json", **auth)
    assert refused.status_code == 400 and "volumes" in refused.json()["fields"]


def test_an_admin_sets_the_storage_quota_per_class(tenants, project_token):
    tenant = tenants["vision-lab"]
    url, auth = f"/api/v1/tenants/{tenant.pk}/quota/", api(project_token("admin", "admin"))
    by_class = {"fast-ssd": {"storage_gib": 200, "volumes": 5},
                "lustre": {"storage_gib": 2000, "volumes": None}}
    response = Client().patch(url, {"storage_by_class": by_class},
                              content_type="application/json", **auth)
    assert response.status_code == 200, response.json()
    assert response.json()["storage_by_class"] == by_class
    record = AuditRecord.objects.get(tenant=tenant, action="quota.update")
    assert (record.before["storage_by_class"], record.after["storage_by_class"]) == \
        ({}, by_class)
    # a write replaces them all: a class left out has none any more
    response = Client().patch(url, {"storage_by_class": {"lustre": {"volumes": 3}}},
                              content_type="application/json", **auth)
    assert response.json()["storage_by_class"] == {"lustre": {"storage_gib": None, "volumes": 3}}
    members = Client().get(url, **api(project_token("researcher", "vision-lab"))).json()
    assert members["storage_by_class"] == {"lustre": {"storage_gib": None, "volumes": 3}}


@pytest.mark.parametrize(("body", "field"), [
    ({"gpus_total": -1}, "gpus_total"),
    ({"gpus_total": "lots"}, "gpus_total"),
    ({"gpus_total": 2.5}, "gpus_total"),
    ({"cpu": 10**9}, "cpu"),
    ({"gpus_by_type": {"h100": 1}}, "gpus_by_type"),
    ({"gpus_by_type": {"a100": -2}}, "gpus_by_type"),
    ({"idle_threshold_percent": 101}, "idle_threshold_percent"),
    ({"idle_action": "explode"}, "idle_action"),
    ({"gpus_total": 500}, "gpus_total"),  # the demo cluster has 28 GPUs
    ({"gpus_by_type": {"t4": 5}}, "gpus_by_type"),  # it has 4 T4
    ({"gpu_borrowing_limit": -1}, "gpu_borrowing_limit"),
    ({"gpu_lending_limit": "half"}, "gpu_lending_limit"),
    ({"fair_share_weight": 0}, "fair_share_weight"),
    ({"fair_share_weight": "1.234"}, "fair_share_weight"),
    ({"storage_by_class": {"Fast SSD": {"storage_gib": 1}}}, "storage_by_class"),
    ({"storage_by_class": {"fast": {"storage_gib": -1}}}, "storage_by_class"),
    ({"storage_by_class": {"fast": {}}}, "storage_by_class"),
    ({"storage_by_class": {"fast": {"iops": 5}}}, "storage_by_class"),
    ({"storage_by_class": ["fast"]}, "storage_by_class"),
])
def test_bad_quota_values_are_400_and_change_nothing(tenants, project_token, body, field):
    tenant = tenants["vision-lab"]
    before = Client().get(f"/api/v1/tenants/{tenant.pk}/quota/",
                          **api(project_token("admin", "admin"))).json()
    response = Client().patch(f"/api/v1/tenants/{tenant.pk}/quota/", body,
                              content_type="application/json",
                              **api(project_token("admin", "admin")))
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert field in response.json()["fields"]
    after = Client().get(f"/api/v1/tenants/{tenant.pk}/quota/",
                         **api(project_token("admin", "admin"))).json()
    assert after == before
    assert not AuditRecord.objects.filter(action="quota.update").exists()


def test_queueing_limits_and_weight_are_set_audited_and_cleared(tenants, project_token):
    tenant = tenants["vision-lab"]
    auth = api(project_token("admin", "admin"))
    url = f"/api/v1/tenants/{tenant.pk}/quota/"
    response = Client().patch(url, {"gpu_borrowing_limit": 2, "gpu_lending_limit": 0,
                                    "fair_share_weight": "2.5"},
                              content_type="application/json", **auth)
    assert response.status_code == 200, response.json()
    assert (response.json()["gpu_borrowing_limit"], response.json()["gpu_lending_limit"],
            response.json()["fair_share_weight"]) == (2, 0, "2.50")
    record = AuditRecord.objects.get(action="quota.update")
    assert (record.before["gpu_borrowing_limit"], record.after["gpu_borrowing_limit"]) == (None, 2)
    assert record.after["fair_share_weight"] == "2.5"
    cleared = Client().patch(url, {"gpu_borrowing_limit": None}, content_type="application/json",
                             **auth).json()
    assert cleared["gpu_borrowing_limit"] is None and cleared["gpu_lending_limit"] == 0


def test_put_needs_every_field(tenants, project_token):
    tenant = tenants["vision-lab"]
    response = Client().put(f"/api/v1/tenants/{tenant.pk}/quota/", {"gpus_total": 4},
                            content_type="application/json",
                            **api(project_token("admin", "admin")))
    assert response.status_code == 400
    assert {"cpu", "memory", "max_workloads"} <= set(response.json()["fields"])


def test_above_capacity_is_allowed_when_marked_as_intended(tenants, project_token):
    tenant = tenants["vision-lab"]
    response = Client().patch(f"/api/v1/tenants/{tenant.pk}/quota/",
                              {"gpus_total": 500, "allow_over_capacity": True},
                              content_type="application/json",
                              **api(project_token("admin", "admin")))
    assert response.status_code == 200
    assert response.json()["gpus_total"] == 500
