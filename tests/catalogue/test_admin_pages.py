"""The admin's catalogue pages: GPU types with live capacity, templates, a tenant's images.

Real Keystone logins, PostgreSQL, the session's kubesim with the demo inventory (2×8 a100,
2×4 v100, 1×4 t4). Launches go through the REST API; their cluster work is not run (the
on-commit task never fires inside the test's transaction): what is checked is what admission
accepts or refuses and what the workload row records.
"""

import re
from pathlib import Path

import pytest
from django.test import Client

from audit.models import AuditRecord
from catalogue.models import GpuType, Template
from tenants.models import Tenant
from tenants.services import quota_update
from tests.fixtures.factories import make_workload
from tests.support.cluster import cluster_cache_caught_up
from tests.support.database import demo_shared_gpu_types
from tests.support.pages import field_error, template_form
from workloads.models import Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "notebook", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def api(project_token):
    """POST /api/v1/workloads/ as researcher in vision-lab."""
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}

    def _launch(body: dict):
        return Client().post("/api/v1/workloads/", body, content_type="application/json",
                             **headers)

    return _launch


def row_of(page: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{row_id}"[^>]*>.*?</tr>', page, re.S)
    assert match, f"no row {row_id}"
    return match.group(0)


def cells(row: str) -> dict[str, str]:
    return dict(re.findall(r'data-col="(\w+)">([^<]*)<', row))


def gpu_type_form(**changes) -> dict:
    form = {"slug": "h100", "name": "NVIDIA H100 80GB", "resource_name": "nvidia.com/gpu",
            "node_selector": "gputype=h100", "memory_gb": "80", "enabled": "on"}
    form.update(changes)
    return {key: value for key, value in form.items() if value is not None}


# --- permissions ------------------------------------------------------------------------------

@pytest.mark.parametrize("username", ["researcher", "lead"])
def test_non_admins_get_403_everywhere(login, gpu_types, cluster, username):
    client = login(username)
    tenant = Tenant.objects.get(name="vision-lab")
    a100 = gpu_types["a100"]
    jupyter = Template.objects.get(slug="jupyter")
    for path in ("/admin/gpu-types/", "/admin/gpu-types/new/", f"/admin/gpu-types/{a100.pk}/",
                 "/admin/templates/", "/admin/templates/new/", f"/admin/templates/{jupyter.pk}/",
                 f"/admin/tenants/{tenant.pk}/image-prefixes/"):
        assert client.get(path).status_code == 403, path
    posts = {
        "/admin/gpu-types/new/": gpu_type_form(),
        f"/admin/gpu-types/{a100.pk}/": gpu_type_form(slug="a100", node_selector="gputype=x"),
        f"/admin/gpu-types/{a100.pk}/enabled/": {"enabled": "0"},
        "/admin/templates/new/": {**template_form(jupyter), "slug": "mine"},
        f"/admin/templates/{jupyter.pk}/": template_form(jupyter, image="evil.example/x:1"),
        f"/admin/templates/{jupyter.pk}/enabled/": {"enabled": "0"},
        f"/admin/tenants/{tenant.pk}/image-prefixes/": {"image_prefixes": "evil.example"},
    }
    for path, data in posts.items():
        assert client.post(path, data).status_code == 403, path
    assert not GpuType.objects.filter(slug="h100").exists()
    assert GpuType.objects.get(pk=a100.pk).enabled
    assert GpuType.objects.get(pk=a100.pk).node_selector == {"gputype": "a100"}
    assert Template.objects.get(pk=jupyter.pk).image == jupyter.image
    assert Template.objects.get(pk=jupyter.pk).enabled
    assert Tenant.objects.get(pk=tenant.pk).image_prefixes == []
    assert not AuditRecord.objects.filter(action__startswith=("gpu_type")).exists()
    assert not AuditRecord.objects.filter(action__startswith="template").exists()


def test_the_admin_navigation_links_the_catalogue(admin):
    page = admin.get("/admin/gpu-types/").content.decode()
    assert '<a href="/admin/gpu-types/" aria-current="page">GPU types</a>' in page
    assert '<a href="/admin/templates/" >Templates</a>' in page


# --- GPU types: capacity ----------------------------------------------------------------------

def test_the_capacity_table_for_the_demo_cluster(admin, gpu_types):
    cluster_cache_caught_up(("Node", "Pod"))  # an earlier test's pods gone from its copy too
    tenant = Tenant.objects.get(name="vision-lab")
    make_workload(  # a running workload holding 2 a100 GPUs (as the tracker leaves it)
        tenant, "researcher", template="custom", kind="batch", gpu_count=2,
        image="nvcr.io/nvidia/pytorch:24.01-py3", port=None, object_name="")
    shared = demo_shared_gpu_types(gpu_types)  # the time-sliced T4 and MIG A100 nodes' types
    response = admin.get("/admin/gpu-types/")
    assert response.status_code == 200
    page = response.content.decode()
    expected = {  # sharing, nodes, allocatable, held, free, largest node (units)
        "a100": {"sharing": "exclusive", "nodes": "2", "allocatable": "16", "held": "2",
                 "free": "14", "largest": "8"},
        "v100": {"sharing": "exclusive", "nodes": "2", "allocatable": "8", "held": "0",
                 "free": "8", "largest": "4"},
        "t4": {"sharing": "exclusive", "nodes": "1", "allocatable": "4", "held": "0",
               "free": "4", "largest": "4"},
        "t4-shared": {"sharing": "time-sliced", "nodes": "1", "allocatable": "16", "held": "0",
                      "free": "16", "largest": "16"},
        "a100-1g-10gb": {"sharing": "mig", "nodes": "1", "allocatable": "14", "held": "0",
                         "free": "14", "largest": "14"},
    }
    types = {**gpu_types, **shared}
    for slug, numbers in expected.items():
        row = row_of(page, f"gpu-type-{types[slug].pk}")
        assert cells(row) == numbers, slug
        assert "gputype=" + types[slug].node_selector["gputype"] in row
        assert 'class="flag"' not in row  # the nodes' labels agree with the catalogue
    quarter = row_of(page, f"gpu-type-{shared['t4-shared'].pk}")
    assert "1/4 of a GPU (t4)" in quarter
    assert "gpu-t4-shared-1: 4 × Tesla-T4, time-slicing 4 ways" in quarter  # the node's layout
    sliced = row_of(page, f"gpu-type-{shared['a100-1g-10gb'].pk}")
    assert "1/7 of a GPU (a100)" in sliced
    assert "gpu-a100-mig-1: 2 × NVIDIA-A100-SXM4-80GB, MIG all-1g.10gb" in sliced
    assert 'id="cluster-note"' not in page
    assert 'id="unclaimed-nodes"' not in page  # every GPU node of the demo has its type


def test_a_type_no_node_serves_is_flagged(admin, gpu_types):
    h100 = GpuType.objects.create(slug="h100", name="NVIDIA H100", node_selector={"gputype": "h100"})
    mig = GpuType.objects.create(slug="a100-mig", name="A100 MIG 1g.10gb",
                                 resource_name="nvidia.com/mig-1g.10gb",
                                 node_selector={"gputype": "a100"})
    page = admin.get("/admin/gpu-types/").content.decode()
    row = row_of(page, f"gpu-type-{h100.pk}")
    assert "No node matches gputype=h100." in row and 'class="flagged"' in row
    assert cells(row) == {"sharing": "exclusive", "nodes": "0", "allocatable": "0",
                          "held": "0", "free": "0", "largest": "0"}
    row = row_of(page, f"gpu-type-{mig.pk}")
    assert "2 nodes match gputype=a100, but none offers nvidia.com/mig-1g.10gb." in row
    # a type removed from the catalogue leaves its nodes unclaimed: the page points at them
    GpuType.objects.filter(slug="t4").delete()
    page = admin.get("/admin/gpu-types/").content.decode()
    unclaimed = page[page.index('id="unclaimed-nodes"'):]
    assert "<code>gpu-t4-" in unclaimed and "gputype=t4" in unclaimed
    assert "4 × nvidia.com/gpu" in unclaimed


def test_an_unreachable_cluster_shows_a_banner_and_the_catalogue(admin, gpu_types, cluster,
                                                                  settings, tmp_path):
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(cluster.url,
                                                                 "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)
    response = admin.get("/admin/gpu-types/")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<div class="banner banner-warning" role="status" id="cluster-note">The cluster ' \
           'is unreachable right now: capacity is not shown.' in page
    row = row_of(page, f"gpu-type-{gpu_types['a100'].pk}")
    assert cells(row) == {"sharing": "exclusive", "nodes": "—", "allocatable": "—",
                          "held": "0", "free": "—", "largest": "—"}
    assert 'class="flag"' not in row  # unknown is not "no node"
    # and without any cluster configured at all
    settings.KUBECONFIG = str(tmp_path / "missing")
    assert admin.get("/admin/gpu-types/").status_code == 200


def test_the_empty_catalogue_says_what_to_do(login, cluster, db):
    client = login("admin")
    page = client.get("/admin/gpu-types/").content.decode()
    assert "No GPU types yet" in page and 'href="/admin/gpu-types/new/"' in page


# --- GPU types: create, edit, enable/disable ------------------------------------------------

def test_create_a_gpu_type(admin):
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(
        node_selector="gputype=h100\n  nvidia.com/gpu.product = NVIDIA-H100-80GB-HBM3 \n"))
    assert response.status_code == 302 and response.url == "/admin/gpu-types/"
    h100 = GpuType.objects.get(slug="h100")
    assert h100.node_selector == {"gputype": "h100",
                                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert (h100.name, h100.memory_gb, h100.enabled) == ("NVIDIA H100 80GB", 80, True)
    record = AuditRecord.objects.get(action="gpu_type.create")
    assert record.actor_name == "admin" and record.target == "gpu_type/h100"
    assert record.after["node_selector"] == h100.node_selector
    page = admin.get("/admin/gpu-types/").content.decode()
    assert "GPU type h100 added." in page and "No node matches gputype=h100, " in page


def test_a_shared_type_is_created_and_the_nodes_labels_check_it(admin, gpu_types):
    # the demo's time-sliced T4 node: 16 × nvidia.com/gpu.shared, replicas 4. Said to be a half
    # of a T4, the list flags it with what the nodes say; a quarter, it agrees
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(
        slug="t4-half", name="half a T4", resource_name="nvidia.com/gpu.shared",
        node_selector="gputype=t4-shared", memory_gb="16", sharing="time-sliced",
        gpu_fraction="1/2", physical="t4"))
    assert response.status_code == 302
    half = GpuType.objects.get(slug="t4-half")
    assert (half.sharing, str(half.gpu_fraction), half.physical_slug) == ("time-sliced", "1/2",
                                                                           "t4")
    record = AuditRecord.objects.get(action="gpu_type.create", target="gpu_type/t4-half")
    assert (record.after["gpu_fraction"], record.after["physical"]) == ("1/2", "t4")
    row = row_of(admin.get("/admin/gpu-types/").content.decode(), f"gpu-type-{half.pk}")
    assert ("The nodes report time-sliced, 1/4 of Tesla-T4; the catalogue says time-sliced, "
            "1/2 of Tesla-T4.") in row and 'class="flagged"' in row
    response = admin.post(f"/admin/gpu-types/{half.pk}/", gpu_type_form(
        slug="t4-half", name="half a T4", resource_name="nvidia.com/gpu.shared",
        node_selector="gputype=t4-shared", memory_gb="16", sharing="time-sliced",
        gpu_fraction="0.25", physical="t4"))
    assert response.status_code == 302
    row = row_of(admin.get("/admin/gpu-types/").content.decode(), f"gpu-type-{half.pk}")
    assert "The nodes report" not in row
    # an exclusive part of a GPU is refused, with the field named
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(gpu_fraction="1/3"))
    assert response.status_code == 400
    assert "An exclusive type is a whole GPU" in field_error(response.content.decode(),
                                                             "gpu_fraction")


def test_invalid_gpu_types_show_field_errors_and_change_nothing(admin):
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(
        slug="a100", name="", resource_name="nvidia.com/GPU s", memory_gb="-1",
        node_selector="gputype=a100\nbad key=x\ngputype=b\nzone=-east\nnolabel"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "A GPU type a100 exists already." in field_error(page, "slug")
    assert "This field is required." in field_error(page, "name")
    assert "Kubernetes extended resource name" in field_error(page, "resource_name")
    assert "greater than or equal to 0" in field_error(page, "memory_gb")
    selector_errors = field_error(page, "node_selector")
    assert "Line 2: “bad key” is not a label key" in selector_errors
    assert "Line 3 gives gputype a second time." in selector_errors
    assert "Line 4: “-east” (for zone) is not a label value" in selector_errors
    assert "Line 5 is not key=value." in selector_errors
    # each error tied to its input, listed in the summary, and what was typed kept
    assert re.search(r'<textarea name="node_selector"[^>]*aria-describedby="hint-node_selector '
                     r'err-node_selector"[^>]*aria-invalid="true"', page)
    assert 'role="alert" id="form-errors"' in page and 'href="#id_resource_name"' in page
    assert 'value="nvidia.com/GPU s"' in page and "zone=-east" in page
    # an empty selector is refused too: the type would have no nodes
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(node_selector="\n  \n"))
    assert "Give at least one node label" in field_error(response.content.decode(),
                                                          "node_selector")
    assert GpuType.objects.count() == 3
    assert not AuditRecord.objects.filter(action__startswith="gpu_type").exists()


def test_edit_a_gpu_type(admin, gpu_types):
    v100 = gpu_types["v100"]
    form = admin.get(f"/admin/gpu-types/{v100.pk}/").content.decode()
    assert re.search(r'<textarea name="node_selector"[^>]*>\s*gputype=v100</textarea>', form)
    assert re.search(r'<input type="text" name="slug" value="v100"[^>]*disabled', form)
    refused = admin.post(f"/admin/gpu-types/{v100.pk}/", gpu_type_form(
        slug="v100", node_selector="gputype=v100\nx/y/z=1"))
    assert refused.status_code == 400
    assert "Line 2: “x/y/z”: the prefix before “/” must be a DNS subdomain" in \
        field_error(refused.content.decode(), "node_selector")
    assert GpuType.objects.get(pk=v100.pk).node_selector == {"gputype": "v100"}
    saved = admin.post(f"/admin/gpu-types/{v100.pk}/", gpu_type_form(
        slug="renamed", name="NVIDIA V100 SXM2", node_selector="gputype=v100", memory_gb="32"))
    assert saved.status_code == 302
    v100.refresh_from_db()
    assert (v100.slug, v100.name, v100.resource_name) == ("v100", "NVIDIA V100 SXM2",
                                                          "nvidia.com/gpu")
    record = AuditRecord.objects.get(action="gpu_type.update")
    assert record.before["name"] == "NVIDIA V100 32GB" and record.after["name"] == "NVIDIA V100 SXM2"
    # saving without a change writes no audit record
    admin.post(f"/admin/gpu-types/{v100.pk}/", gpu_type_form(
        slug="v100", name="NVIDIA V100 SXM2", node_selector="gputype=v100", memory_gb="32"))
    assert AuditRecord.objects.filter(action="gpu_type.update").count() == 1


def test_a_disabled_type_is_refused_at_launch(admin, api, gpu_types):
    a100 = gpu_types["a100"]
    row = admin.post(f"/admin/gpu-types/{a100.pk}/enabled/", {"enabled": "0"},
                     HTTP_HX_REQUEST="true")
    assert row.status_code == 200
    body = row.content.decode()
    assert body.lstrip().startswith(f'<tr id="gpu-type-{a100.pk}" class="disabled-row')
    assert ">Enable</button>" in body and cells(body)["allocatable"] == "16"
    assert not GpuType.objects.get(pk=a100.pk).enabled
    refused = api(JUPYTER)
    assert refused.status_code == 400
    assert refused.json()["fields"]["gpu_type"] == ["The a100 GPU type is disabled."]
    assert not Workload.objects.exists()
    # enabled again (a plain form post, no JavaScript): launches are accepted
    response = admin.post(f"/admin/gpu-types/{a100.pk}/enabled/", {"enabled": "1"})
    assert response.status_code == 302
    assert api(JUPYTER).status_code == 201
    actions = list(AuditRecord.objects.filter(target="gpu_type/a100").order_by("at", "id")
                   .values_list("action", flat=True))
    assert actions == ["gpu_type.disable", "gpu_type.enable"]


# --- templates --------------------------------------------------------------------------------

def test_the_template_list(admin):
    page = admin.get("/admin/templates/").content.decode()
    for slug in ("jupyter", "digits", "tensorboard", "custom"):
        template = Template.objects.get(slug=slug)
        assert f'<tr id="template-{template.pk}"' in page
    assert "<code>quay.io/jupyter/pytorch-notebook:cuda12-python-3.12</code>" in page


def test_a_template_edit_changes_what_a_launch_uses(admin, api):
    jupyter = Template.objects.get(slug="jupyter")
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, slug="notebook", image="quay.io/jupyter/scipy-notebook:2024-05-27",
        default_cpu="2", default_memory_gb="8", env="PIP_INDEX_URL=https://pypi.example/simple"))
    assert response.status_code == 302
    jupyter.refresh_from_db()
    assert jupyter.slug == "jupyter"  # seeded slugs never change
    assert jupyter.image == "quay.io/jupyter/scipy-notebook:2024-05-27"
    assert jupyter.env == {"PIP_INDEX_URL": "https://pypi.example/simple"}
    launched = api(JUPYTER)
    assert launched.status_code == 201, launched.json()
    workload = Workload.objects.get(pk=launched.json()["id"])
    assert workload.image == "quay.io/jupyter/scipy-notebook:2024-05-27"
    assert (workload.cpu, workload.memory_gb) == (2, 8)
    record = AuditRecord.objects.get(action="template.update", target="template/jupyter")
    assert record.before["default_cpu"] == 4 and record.after["default_cpu"] == 2
    # disabled: the launch is refused on the template field
    admin.post(f"/admin/templates/{jupyter.pk}/enabled/", {"enabled": "0"})
    refused = api({**JUPYTER, "name": "another"})
    assert refused.status_code == 400
    assert refused.json()["fields"]["template"] == ["The Jupyter template is disabled."]


def test_invalid_templates_show_field_errors_and_change_nothing(admin):
    templates_before = Template.objects.count()
    jupyter = Template.objects.get(slug="jupyter")
    before = Template.objects.filter(pk=jupyter.pk).values().get()
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, image="quay.io/jupyter/x;rm -rf /", port="", default_cpu="0",
        env="JUPYTER_TOKEN=mine\n1BAD=x\nnot a pair", run_as_user="0"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "cannot contain spaces" in field_error(page, "image")
    assert "A service needs the port it listens on." in field_error(page, "port")
    assert "greater than or equal to 1" in field_error(page, "default_cpu")
    env_errors = field_error(page, "env")
    assert "Line 3 is not KEY=value." in env_errors
    assert "1BAD is not a valid variable name." in env_errors
    assert "JUPYTER_TOKEN is set by the portal" in env_errors
    assert "User 0 is root" in field_error(page, "run_as_user")
    assert 'aria-describedby="hint-image err-image" aria-invalid="true"' in page
    assert Template.objects.filter(pk=jupyter.pk).values().get() == before
    # a template of its own needs an image
    response = admin.post("/admin/templates/new/", {
        **template_form(jupyter, image=""), "slug": "jupyter"})
    page = response.content.decode()
    assert "A template jupyter exists already." in field_error(page, "slug")
    assert "A template needs an image" in field_error(page, "image")
    assert Template.objects.count() == templates_before
    assert not AuditRecord.objects.filter(action__startswith="template").exists()


def test_a_template_may_not_set_the_gpu_stacks_variables(admin):
    jupyter = Template.objects.get(slug="jupyter")
    before = Template.objects.filter(pk=jupyter.pk).values().get()
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, env="NVIDIA_VISIBLE_DEVICES=all\nNVIDIA_REQUIRE_CUDA=cuda>=12\nCUDA_VERSION=12"))
    assert response.status_code == 400
    env_errors = field_error(response.content.decode(), "env")
    for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_REQUIRE_CUDA", "CUDA_VERSION"):
        assert f"{name} is refused: the NVIDIA container runtime reads" in env_errors
    assert Template.objects.filter(pk=jupyter.pk).values().get() == before
    # the loader's variables are an admin's to set on a template
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, env="LD_LIBRARY_PATH=/opt/site/lib"))
    assert response.status_code == 302
    assert Template.objects.get(pk=jupyter.pk).env == {"LD_LIBRARY_PATH": "/opt/site/lib"}


def test_template_and_gpu_type_names_with_invisible_characters_are_refused(admin):
    jupyter = Template.objects.get(slug="jupyter")
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, name="Jupyter\u202e", description="line one\nline\u200btwo"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in field_error(page, "name")
    assert "U+200B ZERO WIDTH SPACE" in field_error(page, "description")
    assert Template.objects.get(pk=jupyter.pk).name == "Jupyter"
    response = admin.post("/admin/gpu-types/new/", gpu_type_form(name="H100\ufeff"))
    assert response.status_code == 400
    assert "U+FEFF" in field_error(response.content.decode(), "name")
    assert not GpuType.objects.filter(slug="h100").exists()


def test_the_custom_template_stays_custom(admin):
    custom = Template.objects.get(slug="custom")
    form = admin.get(f"/admin/templates/{custom.pk}/").content.decode()
    assert re.search(r'<input type="checkbox" name="custom"[^>]*disabled', form)
    response = admin.post(f"/admin/templates/{custom.pk}/", template_form(
        custom, slug="mine", kind="service", default_cpu="8"))  # "custom" unticked
    assert response.status_code == 302
    custom.refresh_from_db()
    assert (custom.slug, custom.custom, custom.kind, custom.default_cpu) == \
        ("custom", True, "service", 8)
    assert custom.image == ""  # the researcher's image, no port needed for the template


def test_create_a_template(admin, api):
    response = admin.post("/admin/templates/new/", {
        "slug": "pytorch-batch", "name": "PyTorch training", "kind": "batch",
        "image": "nvcr.io/nvidia/pytorch:24.01-py3", "command": "python\n-c",
        "args": "import torch; print(torch.cuda.is_available())", "port": "8080",
        "default_cpu": "8", "default_memory_gb": "32", "run_as_user": "1000",
        "enabled": "on"})
    assert response.status_code == 302, response.context["form"].errors.as_json()
    template = Template.objects.get(slug="pytorch-batch")
    assert template.command == ["python", "-c"]
    assert template.args == ["import torch; print(torch.cuda.is_available())"]
    assert template.port is None and not template.custom
    assert AuditRecord.objects.filter(action="template.create",
                                      target="template/pytorch-batch").count() == 1
    launched = api({"name": "train", "template": "pytorch-batch", "gpu_type": "a100",
                    "gpu_count": 1})
    assert launched.status_code == 201, launched.json()
    assert launched.json()["kind"] == "batch"


def test_the_admin_decides_whether_researchers_may_replace_a_templates_image(admin, api,
                                                                           settings):
    jupyter = Template.objects.get(slug="jupyter")
    form = admin.get(f"/admin/templates/{jupyter.pk}/").content.decode()
    assert '<input type="checkbox" name="image_replaceable"' in form
    other = {**JUPYTER, "image": "quay.io/jupyter/scipy-notebook:2024-05-27"}
    assert api(other).status_code == 400
    response = admin.post(f"/admin/templates/{jupyter.pk}/",
                          template_form(jupyter, image_replaceable="on"))
    assert response.status_code == 302
    assert Template.objects.get(pk=jupyter.pk).image_replaceable
    record = AuditRecord.objects.get(action="template.update", target="template/jupyter")
    assert (record.before["image_replaceable"], record.after["image_replaceable"]) == \
        (False, True)
    assert api(other).status_code == 201
    assert "or the researcher's" in admin.get("/admin/templates/").content.decode()
    # a template's own image outside the site's registries could never run: refused here
    settings.PORTAL_IMAGE_REGISTRIES = ["nvcr.io/nvidia"]
    response = admin.post(f"/admin/templates/{jupyter.pk}/", template_form(
        jupyter, image="quay.io/jupyter/scipy-notebook:2024-05-27"))
    assert response.status_code == 400
    assert "Outside the site&#x27;s registries (PORTAL_IMAGE_REGISTRIES: nvcr.io/nvidia)" in \
        field_error(response.content.decode(), "image")


def test_the_admin_decides_per_template_and_per_project_whether_root_may_run(admin, api):
    """DIGITS may run as root, so it runs only in projects an admin lets run
    such templates; their namespace then enforces "baseline" instead of "restricted"."""
    digits = Template.objects.get(slug="digits")
    assert digits.allow_root and not Template.objects.get(slug="custom").allow_root
    assert "may run as root: only in projects allowed root" in \
        row_of(admin.get("/admin/templates/").content.decode(), f"template-{digits.pk}")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_total": 8,
                                                           "gpus_by_type": {"v100": 4}})
    body = {**JUPYTER, "template": "digits", "gpu_type": "v100"}
    assert api(body).status_code == 400
    page = admin.get(f"/admin/tenants/{tenant.pk}/").content.decode()
    section = re.search(r'<section class="card" id="pod-security">.*?</section>', page, re.S)[0]
    assert '<strong id="pod-security-level">restricted</strong>' in section
    assert "(NVIDIA DIGITS)" in section
    response = admin.post(f"/admin/tenants/{tenant.pk}/pod-security/",
                          {"allow_root_templates": "on"}, follow=True)
    assert "namespace will enforce Pod Security “baseline”" in response.content.decode()
    assert Tenant.objects.get(pk=tenant.pk).allow_root_templates
    assert AuditRecord.objects.filter(action="tenant.allow_root_templates",
                                      tenant=tenant).count() == 1
    assert api(body).status_code == 201
    # a template that may not run as root cannot name user 0, and the choice is audited
    response = admin.post(f"/admin/templates/{digits.pk}/", template_form(
        digits, allow_root=None, run_as_user="0"))
    assert "User 0 is root" in field_error(response.content.decode(), "run_as_user")
    response = admin.post(f"/admin/templates/{digits.pk}/", template_form(
        digits, allow_root=None, run_as_user="1000"))
    assert response.status_code == 302 and not Template.objects.get(pk=digits.pk).allow_root
    record = AuditRecord.objects.get(action="template.update", target="template/digits")
    assert (record.before["allow_root"], record.after["allow_root"]) == (True, False)


# --- a tenant's image registries --------------------------------------------------------------

def test_image_prefixes_restrict_a_tenants_launches(admin, api):
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_total": 8,
                                                           "gpus_by_type": {"a100": 4}})
    detail = admin.get(f"/admin/tenants/{tenant.pk}/").content.decode()
    assert '<section class="card" id="image-prefixes">' in detail
    assert '<label for="id_image_prefixes">Allowed image registries and prefixes</label>' in detail
    url = f"/admin/tenants/{tenant.pk}/image-prefixes/"
    refused = admin.post(url, {"image_prefixes": "nvcr.io/nvidia\nhttp://x.example/a b"},
                         HTTP_HX_REQUEST="true")
    body = refused.content.decode()
    assert 'id="image-prefixes"' in body and "Line 2:" in field_error(body, "image_prefixes")
    assert "http://x.example/a b" in body  # what was typed is kept
    assert Tenant.objects.get(pk=tenant.pk).image_prefixes == []
    saved = admin.post(url, {"image_prefixes": "nvcr.io/nvidia\n\n  pytorch  \nnvcr.io/nvidia/"})
    assert saved.status_code == 302 and saved.url == f"/admin/tenants/{tenant.pk}/"
    tenant.refresh_from_db()
    assert tenant.image_prefixes == ["nvcr.io/nvidia", "docker.io/pytorch"]
    record = AuditRecord.objects.get(action="tenant.image_prefixes", tenant=tenant)
    assert (record.before, record.after) == ([], ["nvcr.io/nvidia", "docker.io/pytorch"])
    page = admin.get(f"/admin/tenants/{tenant.pk}/").content.decode()
    assert ("Its launches of Jupyter, TensorBoard, MPI (mpirun), VS Code (code-server) will "
            "be refused") in page
    assert "nvcr.io/nvidia\ndocker.io/pytorch</textarea>" in page
    # outside the list: 400 on image (the template's own image, and a custom one)
    refused = api(JUPYTER)
    assert refused.status_code == 400
    assert refused.json()["fields"]["image"] == [
        "vision-lab may only use images from: nvcr.io/nvidia, docker.io/pytorch."]
    custom = {"name": "job", "template": "custom", "kind": "batch", "gpu_type": "a100",
              "gpu_count": 1, "command": ["python", "train.py"]}
    assert api({**custom, "image": "nvcr.io/nvidiax/pytorch:1"}).status_code == 400
    accepted = api({**custom, "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"})
    assert accepted.status_code == 201, accepted.json()
    # empty again: any image
    admin.post(url, {"image_prefixes": ""})
    assert Tenant.objects.get(pk=tenant.pk).image_prefixes == []
    assert api(JUPYTER).status_code == 201
    assert AuditRecord.objects.filter(action="tenant.image_prefixes").count() == 2
