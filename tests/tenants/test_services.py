import pytest

from tenants.models import Tenant
from tenants.services import tenant_ensure

pytestmark = pytest.mark.django_db


def test_first_sight_creates_a_tenant_with_a_valid_namespace():
    tenant = tenant_ensure(keystone_project_id="p-1", name="Vision Lab")
    assert tenant.namespace.startswith("gpu-vision-lab-")
    assert tenant.state == Tenant.State.NEW


def test_second_sight_is_the_same_row():
    a = tenant_ensure(keystone_project_id="p-1", name="Vision Lab")
    b = tenant_ensure(keystone_project_id="p-1", name="Vision Lab")
    assert a.pk == b.pk
    assert Tenant.objects.count() == 1


def test_a_renamed_project_keeps_its_namespace():
    a = tenant_ensure(keystone_project_id="p-1", name="Vision Lab")
    b = tenant_ensure(keystone_project_id="p-1", name="Vision Group")
    assert b.name == "Vision Group"
    assert b.namespace == a.namespace


def test_colliding_names_get_distinct_namespaces():
    a = tenant_ensure(keystone_project_id="p-1", name="ML Lab")
    b = tenant_ensure(keystone_project_id="p-2", name="ml-lab")
    assert a.namespace != b.namespace


def test_a_taken_namespace_makes_the_digest_longer(settings):
    first = tenant_ensure(keystone_project_id="p-1", name="x")
    # squat the name the next project would get, as a stale row might
    from kube.labels import namespace_name

    squatted = namespace_name(project_name="y", project_id="p-2")
    Tenant.objects.filter(pk=first.pk).update(namespace=squatted)
    second = tenant_ensure(keystone_project_id="p-2", name="y")
    assert second.namespace != squatted
    assert second.namespace.startswith("gpu-y-")
    assert len(second.namespace.rsplit("-", 1)[1]) == 10


@pytest.mark.parametrize("lookalike", [
    "vision\u2010lab",  # U+2010 HYPHEN
    "vis\u0456on-lab",  # Cyrillic і
    "vision-1ab",
    "Vision-Lab",
    "\uff56ision-lab",  # fullwidth v
    "vision-la\u200bb",  # a zero-width space inside
])
def test_a_project_whose_name_looks_like_anothers_gets_no_tenant(lookalike):
    from tenants.services import TenantNameConfusable

    first = tenant_ensure(keystone_project_id="p-1", name="vision-lab")
    with pytest.raises(TenantNameConfusable) as refused:
        tenant_ensure(keystone_project_id="p-2", name=lookalike)
    assert "p-1" in str(refused.value) and "p-2" in str(refused.value)
    assert list(Tenant.objects.values_list("pk", flat=True)) == [first.pk]


@pytest.mark.parametrize("different", ["vision-labs", "vision lab", "nlp-lab", "vision-lab-2"])
def test_names_that_only_resemble_are_kept_apart(different):
    tenant_ensure(keystone_project_id="p-1", name="vision-lab")
    assert tenant_ensure(keystone_project_id="p-2", name=different).name == different


def test_a_project_renamed_to_anothers_lookalike_keeps_its_name():
    tenant_ensure(keystone_project_id="p-1", name="vision-lab")
    renamed = tenant_ensure(keystone_project_id="p-2", name="nlp-lab")
    assert tenant_ensure(keystone_project_id="p-2", name="vision\u2010lab").name == "nlp-lab"
    assert Tenant.objects.get(pk=renamed.pk).name == "nlp-lab"


def test_the_projects_seen_at_login_skip_a_lookalike_and_record_the_rest():
    from identity.client import Project
    from tenants.services import tenants_ensure_for_projects

    tenant_ensure(keystone_project_id="p-1", name="vision-lab")
    tenants_ensure_for_projects(projects=[
        Project(id="p-2", name="vision\u2010lab", domain_id="default"),
        Project(id="p-3", name="nlp-lab", domain_id="default")])
    assert sorted(Tenant.objects.values_list("keystone_project_id", flat=True)) == ["p-1", "p-3"]
