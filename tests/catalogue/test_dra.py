"""A GPU type claimed through DRA on a cluster that does not serve resource.k8s.io/v1 (kubesim):
the admin creates it, the catalogue and the API say what it is, a launch is refused 400
dra_unavailable and the admin's list says why. On a cluster that serves it, the real scheduler
allocates its claims (tests/realcluster/test_dra.py)."""

from fractions import Fraction

import pytest
from django.test import Client

from audit.models import AuditRecord
from catalogue.models import GpuType
from catalogue.services import CatalogueRefused, gpu_type_create, gpu_type_update
from tenants.models import Tenant
from tenants.services import quota_update
from tests.support.database import dra_gpu_type
from tests.support.pages import field_error, launch_form
from workloads.models import Workload

pytestmark = pytest.mark.django_db

DRA_FORM = {"slug": "a100-dra", "name": "NVIDIA A100 80GB (DRA)",
            "resource_name": "nvidia.com/gpu", "node_selector": "gputype=a100-dra",
            "memory_gb": "80", "enabled": "on", "sharing": "dra", "gpu_fraction": "1",
            "device_class": "gpu.nvidia.com", "product": "NVIDIA A100-SXM4-80GB"}


def row_of(page: str, slug: str) -> str:
    pk = GpuType.objects.get(slug=slug).pk
    start = page.index(f'<tr id="gpu-type-{pk}"')
    return page[start:page.index("</tr>", start)]


def test_an_admin_adds_a_dra_type_and_the_list_says_the_cluster_cannot_serve_it(admin, cluster):
    response = admin.post("/admin/gpu-types/new/", DRA_FORM)
    assert response.status_code == 302, response.content.decode()[:2000]
    created = GpuType.objects.get(slug="a100-dra")
    assert (created.sharing, created.device_class, created.product, created.gpu_fraction) == (
        "dra", "gpu.nvidia.com", "NVIDIA A100-SXM4-80GB", 1)
    record = AuditRecord.objects.get(action="gpu_type.create", target="gpu_type/a100-dra")
    assert record.after["device_class"] == "gpu.nvidia.com"
    row = row_of(admin.get("/admin/gpu-types/").content.decode(), "a100-dra")
    assert "does not serve resource.k8s.io/v1" in row and 'class="flagged"' in row
    # a whole GPU's class with a part of one, or a class for another sharing, is refused
    response = admin.post("/admin/gpu-types/new/", {**DRA_FORM, "slug": "half",
                                                    "gpu_fraction": "1/2"})
    assert response.status_code == 400
    response = admin.post("/admin/gpu-types/new/", {**DRA_FORM, "slug": "other",
                                                    "sharing": "exclusive"})
    assert response.status_code == 400
    assert "Only a DRA type" in response.content.decode()


def test_a_dra_types_fields_agree(db):
    dra = dra_gpu_type()
    for changes, why in (({"device_class": ""}, "names its device class"),
                         ({"product": "x' || true || '"}, "as the driver publishes it"),
                         ({"device_class": "mig.nvidia.com"}, "a MIG instance a part of one")):
        with pytest.raises(CatalogueRefused, match=why):
            gpu_type_update(gpu_type=dra, acting_user=None, changes=changes)
    mig = gpu_type_update(gpu_type=dra, acting_user=None, changes={
        "device_class": "mig.nvidia.com", "gpu_fraction": Fraction(1, 7)})
    assert mig.gpu_fraction == Fraction(1, 7)


def test_each_dra_type_has_a_device_class_of_its_own_and_the_page_shows_kueues_lines(
        admin, cluster, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:
        assert admin.post("/admin/gpu-types/new/", DRA_FORM).status_code == 302
    # a DRA type made: the tenants' reconcile makes its DeviceClass on each cluster at once
    assert len(sent) == 1
    dra_gpu_type("h100")
    page = admin.get("/admin/gpu-types/").content.decode()
    assert "DeviceClass <code>h100-dra.gpu-portal.io</code>" in row_of(page, "h100-dra")
    mappings = page.split('id="kueue-device-class-mappings"', 1)[1].split("</section>", 1)[0]
    assert ("- name: a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices\n"
            "    deviceClassNames: [a100-dra.gpu-portal.io]\n"
            "  - name: h100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices\n"
            "    deviceClassNames: [h100-dra.gpu-portal.io]") in mappings
    # the slug names the class: a DNS label
    with pytest.raises(CatalogueRefused, match="names its DeviceClass"):
        gpu_type_create(acting_user=None, slug="A100_dra", name="x", resource_name="nvidia.com/gpu",
                        node_selector={}, memory_gb=80, sharing="dra",
                        device_class="gpu.nvidia.com")


def test_a_dra_launch_on_kubesim_is_refused_400_dra_unavailable(login, gpu_types, cluster,
                                                                project_token):
    dra_gpu_type()
    login("researcher")
    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes={"gpus_total": 4,
                                                          "gpus_by_type": {"a100-dra": 2}})
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    types = {row["slug"]: row for row in Client().get("/api/v1/gpu-types/", **headers).json()}
    assert (types["a100-dra"]["sharing"], types["a100-dra"]["gpu_fraction_text"]) == ("dra", "1")
    # its claims name the type's own DeviceClass, whose devices its quota counts
    assert (types["a100-dra"]["device_class"], types["a100-dra"]["quota_resource"]) == (
        "a100-dra.gpu-portal.io", "a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices")
    assert (types["a100"]["device_class"], types["a100"]["quota_resource"]) == (
        None, "nvidia.com/gpu")
    assert types["a100-dra"]["mig_profile"] is None  # a whole GPU
    response = Client().post("/api/v1/workloads/", {
        "name": "claimed", "template": "jupyter", "gpu_type": "a100-dra", "gpu_count": 1},
        content_type="application/json", **headers)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "dra_unavailable"
    assert "does not serve resource.k8s.io/v1" in body["detail"]
    assert not Workload.objects.filter(tenant=vision).exists()


def test_the_launch_page_names_the_refusal_on_the_gpu_type(login, gpu_types, cluster):
    dra_gpu_type()
    client = login("researcher")
    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100-dra": 2}})
    response = client.post("/workloads/new/", launch_form(name="claimed", gpu_type="a100-dra"))
    assert response.status_code == 400
    assert "does not serve resource.k8s.io/v1" in field_error(response.content.decode(),
                                                              "gpu_type")


def test_a_dra_mig_types_class_selects_its_profile_by_its_slices_and_memory(db):
    from catalogue.sharing import dra_mig_profile, dra_type_class_selector
    from tests.support.database import dra_mig_gpu_type

    mig = dra_mig_gpu_type("3g.40gb")
    assert (mig.dra_profile, mig.gpu_fraction) == ("3g.40gb", Fraction(3, 7))
    assert dra_gpu_type("h100").dra_profile == ""  # a whole GPU
    assert dra_mig_profile(device_class="mig.nvidia.com", fraction=Fraction(1, 4), memory_gb=6,
                           product="NVIDIA A30") == "1g.6gb"  # four slices
    assert dra_mig_profile(device_class="mig.nvidia.com", fraction=Fraction(1, 3), memory_gb=6,
                           product="NVIDIA A30") == ""  # no whole number of slices
    # the profiles of one board differ in their profile, not in their product
    assert dra_type_class_selector(device_class="mig.nvidia.com", product=mig.product,
                                   memory_gb=40, profile=mig.dra_profile) == (
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig' && "
        "device.attributes['gpu.nvidia.com'].profile == '3g.40gb' && "
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40G')) >= 0")
