"""seed_demo: the demo's catalogue, quotas and root templates, idempotent and never undoing an
admin's change."""

import pytest
from django.core.management import call_command

from tenants.models import Tenant
from tenants.services import tenant_root_templates_update

pytestmark = pytest.mark.django_db


def test_the_demo_lets_vision_lab_run_digits_and_keeps_an_admins_change(keystone):
    call_command("seed_demo")
    vision, nlp = Tenant.objects.get(name="vision-lab"), Tenant.objects.get(name="nlp-lab")
    assert vision.allow_root_templates and not nlp.allow_root_templates
    assert vision.quota.gpus_by_type()["a100"] == 4
    tenant_root_templates_update(tenant=vision, acting_user=None, allow=False)
    call_command("seed_demo")  # a restart of the demo
    vision.refresh_from_db()
    assert not vision.allow_root_templates
