"""Keystone projects → tenants, through the portal's service identity (system reader)."""

import uuid

import pytest

from tenants.keystone_sync import tenants_sync_from_keystone
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def test_new_projects_become_tenants_and_vanished_ones_start_deleting(keystone, gpu_types):
    admin = keystone.admin()
    name = f"sync-{uuid.uuid4().hex[:8]}"
    project = admin.projects.create(name=name, domain="default")
    counts = tenants_sync_from_keystone()
    tenant = Tenant.objects.get(keystone_project_id=project.id)
    assert tenant.name == name and tenant.state == Tenant.State.NEW
    assert counts["seen"] >= 3  # admin, vision-lab, nlp-lab and this one; not `service`
    assert not Tenant.objects.filter(name="service").exists()

    admin.projects.update(project, enabled=False)
    tenants_sync_from_keystone()
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETING
    assert "gone or disabled" in tenant.state_reason

    admin.projects.update(project, enabled=True)  # it came back within the grace
    assert tenants_sync_from_keystone()["restored"] == 1
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.NEW

    admin.projects.delete(project)
    tenants_sync_from_keystone()
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETING
