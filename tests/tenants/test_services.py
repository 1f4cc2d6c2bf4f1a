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
