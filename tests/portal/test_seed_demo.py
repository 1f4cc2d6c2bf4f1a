"""seed_demo: the demo's catalogue, quotas and root templates, idempotent and never undoing an
admin's change."""

import io

import pytest
from django.core.management import call_command
from django.test import TestCase
from kubernetes import client as k8s

from storage.models import StorageClass
from tenants.models import Tenant
from tenants.services import tenant_root_templates_update

pytestmark = pytest.mark.django_db


def test_the_demo_lets_vision_lab_run_digits_and_keeps_an_admins_change(keystone, cluster,
                                                                       eager_celery):
    call_command("seed_demo", stdout=io.StringIO())
    vision, nlp = Tenant.objects.get(name="vision-lab"), Tenant.objects.get(name="nlp-lab")
    assert vision.allow_root_templates and not nlp.allow_root_templates
    # kubesim's class, offered for volumes (growable, the default) while none is
    offered = StorageClass.objects.get()
    assert (offered.name, offered.expandable, offered.is_default) == ("standard", True, True)
    assert vision.quota.gpus_by_type()["a100"] == 4
    tenant_root_templates_update(tenant=vision, acting_user=None, allow=False)
    call_command("seed_demo", stdout=io.StringIO())  # a restart of the demo
    vision.refresh_from_db()
    assert not vision.allow_root_templates


def test_a_demo_started_against_another_cluster_provisions_every_tenant_there(
        keystone, cluster, kubesim_factory, settings, eager_celery):
    """`make demo`, then `make demo CLUSTER=kube`: the tenants are recorded as provisioned, the
    other cluster has none of their namespaces. The start provisions them there (issue 23)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command("seed_demo")
    tenants = list(Tenant.objects.filter(name__in=("vision-lab", "nlp-lab")))
    assert len(tenants) == 2
    assert all(t.state == Tenant.State.PROVISIONED for t in tenants)
    other = kubesim_factory()
    settings.KUBECONFIG = str(other.kubeconfig)
    with other.api_client() as api:
        names = {ns.metadata.name for ns in k8s.CoreV1Api(api).list_namespace().items}
        assert not {t.namespace for t in tenants} & names
        call_command("seed_demo", stdout=io.StringIO())  # the restart, against the other one
        names = {ns.metadata.name for ns in k8s.CoreV1Api(api).list_namespace().items}
    assert {t.namespace for t in tenants} <= names
