"""seed_demo: the demo's catalogue, quotas and root templates, idempotent and never undoing an
admin's change."""

import io

import pytest
from django.core.management import call_command
from django.test import TestCase
from kubernetes import client as k8s

from catalogue.forms import SLUG
from catalogue.models import GpuType
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
    # the shared types of the demo's time-sliced T4 node and MIG A100 node, with quota on both
    shared = {t.slug: (t.sharing, str(t.gpu_fraction), t.physical_slug, t.resource_name)
              for t in GpuType.objects.exclude(sharing="exclusive")}
    assert shared == {
        "t4-shared": ("time-sliced", "1/4", "t4", "nvidia.com/gpu.shared"),
        "a100-1g-10gb": ("mig", "1/7", "a100", "nvidia.com/mig-1g.10gb")}
    # slugs an admin could have typed (the form's rule): a dot is no slug's
    assert all(SLUG.fullmatch(slug) for slug in shared)
    for tenant in (vision, nlp):
        by_type = tenant.quota.gpus_by_type()
        assert by_type["t4-shared"] > 0 and by_type["a100-1g-10gb"] > 0
    # the demo contract's figures stand
    assert {slug: vision.quota.gpus_by_type()[slug] for slug in ("a100", "v100", "t4")} == {
        "a100": 4, "v100": 4, "t4": 0}
    assert {slug: nlp.quota.gpus_by_type()[slug] for slug in ("a100", "v100", "t4")} == {
        "a100": 2, "v100": 0, "t4": 4}
    assert (vision.quota.gpus_total, nlp.quota.gpus_total) == (8, 6)
    tenant_root_templates_update(tenant=vision, acting_user=None, allow=False)
    call_command("seed_demo", stdout=io.StringIO())  # a restart of the demo
    vision.refresh_from_db()
    assert not vision.allow_root_templates


def test_a_demo_started_against_another_cluster_provisions_every_tenant_there(
        keystone, cluster, kubesim_factory, settings, eager_celery):
    """`make demo`, then `make demo CLUSTER=kube`: the tenants are recorded as provisioned, the
    other cluster has none of their namespaces. The start provisions them there."""
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
