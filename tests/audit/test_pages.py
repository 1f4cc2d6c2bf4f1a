"""The admin's audit page (/admin/audit/): for admins only, filtered by user, tenant and action."""

import pytest

from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(login, gpu_types, cluster):
    login("researcher")  # records vision-lab and nlp-lab as tenants
    return login("admin")


def test_non_admins_cannot_open_the_audit_page(login, gpu_types, cluster):
    client = login("lead")
    assert client.get("/admin/audit/").status_code == 403


def test_the_audit_page_filters(admin_client):
    tenant = Tenant.objects.get(name="nlp-lab")
    admin_client.post(f"/admin/tenants/{tenant.pk}/row/", {"cpu": "33"}, HTTP_HX_REQUEST="true")
    page = admin_client.get("/admin/audit/?user=admin").content.decode()
    assert "quota.update" in page and "tenant.create" not in page
    page = admin_client.get(f"/admin/audit/?tenant={tenant.pk}&action=tenant").content.decode()
    assert "tenant.create" in page and "quota.update" not in page
