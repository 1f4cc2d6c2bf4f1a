"""The audit trail's API (GET /api/v1/audit/): for admins only, filtered as the page filters."""

import pytest
from django.test import Client

from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenants(login, gpu_types, cluster):
    """Tenants for the demo projects exist once someone has logged in."""
    login("researcher")
    return {t.name: t for t in Tenant.objects.all()}


def api(token: str) -> dict:
    return {"HTTP_X_AUTH_TOKEN": token}


def test_the_audit_log_is_for_admins_and_filters(tenants, project_token, login):
    admin_auth = api(project_token("admin", "admin"))
    tenant = tenants["vision-lab"]
    Client().patch(f"/api/v1/tenants/{tenant.pk}/quota/", {"cpu": 40},
                   content_type="application/json", **admin_auth)
    assert Client().get("/api/v1/audit/", **api(project_token("lead", "vision-lab"))).status_code == 403
    by_user = Client().get("/api/v1/audit/?user=admin", **admin_auth).json()["results"]
    assert [r["action"] for r in by_user] == ["quota.update"]
    by_tenant = Client().get(f"/api/v1/audit/?tenant={tenant.pk}&action=tenant",
                             **admin_auth).json()["results"]
    assert [r["action"] for r in by_tenant] == ["tenant.create"]
