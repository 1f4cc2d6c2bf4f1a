"""The tenant page's "Services and SSH" section (access/admin_views.py): an admin turns SSH into
a tenant's workloads off and on, audited; nobody else may. Real Keystone logins and PostgreSQL."""

import re

import pytest

from access.models import TenantServiceAccess
from access.services import tenant_service_access
from audit.models import AuditRecord
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision_lab(login, gpu_types, cluster) -> Tenant:
    login("researcher")  # records vision-lab and nlp-lab as tenants
    return Tenant.objects.get(name="vision-lab")


def ssh_switch(page: str) -> str:
    match = re.search(r'<input type="checkbox" id="id_ssh_enabled" name="ssh_enabled"[^>]*>', page)
    assert match, "no SSH switch on the tenant page"
    return match.group(0)


def test_an_admin_turns_ssh_off_and_on_from_the_tenant_page(login, vision_lab):
    admin = login("admin")
    page = admin.get(f"/admin/tenants/{vision_lab.pk}/").content.decode()
    assert '<section class="card" id="service-access">' in page
    assert " checked" in ssh_switch(page)  # the site's default (PORTAL_SSH_ENABLED_DEFAULT)
    assert '<dd id="service-access-ssh">on</dd>' in page
    assert '<dd id="service-access-who">members of the project (and managers, admins)</dd>' in page
    assert f'action="/admin/tenants/{vision_lab.pk}/ssh/"' in page

    response = admin.post(f"/admin/tenants/{vision_lab.pk}/ssh/", {})  # unticked
    assert response.status_code == 302 and response.url == f"/admin/tenants/{vision_lab.pk}/"
    assert tenant_service_access(vision_lab).ssh_enabled is False
    record = AuditRecord.objects.filter(action="tenant.service_access", tenant=vision_lab).get()
    assert record.actor.name == "admin"
    assert record.before["ssh_enabled"] is True and record.after["ssh_enabled"] is False
    page = admin.get(response.url).content.decode()
    assert " checked" not in ssh_switch(page)
    assert '<dd id="service-access-ssh">off</dd>' in page
    assert "Open sessions end at their server&#x27;s next check, within a minute." in page

    admin.post(f"/admin/tenants/{vision_lab.pk}/ssh/", {"ssh_enabled": "on"})
    assert TenantServiceAccess.objects.get(tenant=vision_lab).ssh_enabled is True
    assert AuditRecord.objects.filter(action="tenant.service_access",
                                      tenant=vision_lab).count() == 2


def test_only_admins_may_switch_ssh(login, vision_lab):
    for username in ("lead", "researcher"):  # the project's manager, a member
        response = login(username).post(f"/admin/tenants/{vision_lab.pk}/ssh/", {})
        assert response.status_code == 403, username
    assert tenant_service_access(vision_lab).ssh_enabled is True
    assert not TenantServiceAccess.objects.filter(tenant=vision_lab).exists()
    assert login("admin").get(f"/admin/tenants/{vision_lab.pk}/ssh/").status_code == 405
