"""The researcher's workload pages: launch form, list, workload page, dashboard.

Real Keystone logins, the portal's own PostgreSQL, kubesim over HTTP; launches run the create
task inline (eager Celery, on-commit callbacks executed).
"""

import re
from pathlib import Path

import pytest

from catalogue.models import Template
from kube.client import Kube
from tenants.models import Tenant
from tests.support.pages import field_error, launch_form, make_workload
from tests.support.waiting import eventually
from workloads.models import Workload

pytestmark = pytest.mark.django_db

NEVER_FITS = "No t4 node has 8 GPUs (the largest has 4); this request can never run."


# --- launch -----------------------------------------------------------------------------------

def test_the_launch_page_offers_templates_gpu_types_and_the_quota_left(researcher):
    page = researcher.get("/workloads/new/").content.decode()
    for slug in ("jupyter", "digits", "tensorboard", "custom"):
        assert f'name="template" value="{slug}"' in page
    assert "JupyterLab with PyTorch and CUDA" in page  # the template's description
    # each GPU type with its free count and the quota left, a100 first with quota left
    assert re.search(r'<option value="a100" selected>NVIDIA A100 80GB \(a100\) — \d+ of 16 free'
                     r' · quota: 4 more</option>', page)
    assert re.search(r'<option value="t4" >NVIDIA T4 \(t4\) — \d+ of 4 free · quota: 0 more', page)
    # CPU and memory prefilled with the template's defaults; every input has its label
    assert 'id="id_cpu" name="cpu" type="number" min="1" max="256" inputmode="numeric" ' \
           'value="4"' in page
    assert 'value="16"' in page
    for field in ("name", "gpu_type", "gpu_count", "cpu", "memory", "max_runtime_minutes"):
        assert f'<label for="id_{field}">' in page
    # the live check: what is free and what the project may still use
    check = re.search(r'<div id="launch-check".*?</div>', page, re.S).group(0)
    assert 'hx-get="/workloads/new/check/"' in check
    assert re.search(r"<strong>\d+ free</strong> of 16 a100", page)
    assert "your project may use <strong>4 more</strong>" in page
    # the custom image fields appear with the custom template
    assert 'name="image"' not in page
    custom = researcher.get("/workloads/new/?template=custom").content.decode()
    for field in ("kind", "image", "command", "args", "env", "port", "retries"):
        assert f'<label for="id_{field}">' in custom


def test_launch_jupyter_on_one_a100_from_the_form(researcher, vision_lab,
                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher.post("/workloads/new/", launch_form(name="My notebook"))
    workload = Workload.objects.get(tenant=vision_lab, name="My notebook")
    assert response.status_code == 302 and response.url == f"/workloads/{workload.pk}/"
    assert (workload.template.slug, workload.gpu_type.slug, workload.gpu_count) == \
        ("jupyter", "a100", 1)
    assert workload.owner.name == "researcher"
    assert workload.state == Workload.State.PENDING  # the create task ran inline
    kube = Kube()
    assert kube.get("Deployment", workload.object_name, vision_lab.namespace) is not None

    page = researcher.get(response.url).content.decode()
    assert "My notebook was submitted: 1× a100, Jupyter." in page  # the flash message
    assert "<h1>My notebook</h1>" in page
    assert '<span class="state state-pending"' in page
    assert 'hx-trigger="every 3s"' in page  # live while active
    assert re.search(r"<td>Submitted</td>\s*<td>researcher launched jupyter on 1× a100</td>",
                     page.replace('<td>Normal</td><td>', '<td>'))
    # the pod starts in kubesim and its log lines reach the page
    def logs_shown():
        live = researcher.get(f"/workloads/{workload.pk}/live/", HTTP_HX_REQUEST="true")
        return live if "Jupyter Server" in live.content.decode() else None

    live = eventually(logs_shown, timeout=10, message="the pod's log lines did not reach the page")
    assert '<pre class="logs" id="workload-logs"' in live.content.decode()
    assert "Jupyter Server" in live.content.decode()


def test_the_same_form_submitted_twice_launches_once(researcher, vision_lab):
    form = launch_form(name="twice")
    first = researcher.post("/workloads/new/", form)
    second = researcher.post("/workloads/new/", form, follow=True)
    assert Workload.objects.filter(name="twice").count() == 1
    assert second.redirect_chain[-1][0] == first.url
    assert "twice was already submitted by this form." in second.content.decode()
    # the same form changed (e.g. after going back) is a new launch
    third = researcher.post("/workloads/new/", {**form, "gpu_type": "v100"})
    assert third.status_code == 302 and third.url != first.url
    assert Workload.objects.filter(name="twice").count() == 2


def test_a_launch_beyond_the_quota_shows_the_refusal_with_the_fields_kept(researcher, vision_lab):
    make_workload(vision_lab, "researcher", name="big run", gpu_count=4)
    # the live check says so before submitting
    check = researcher.get("/workloads/new/check/?gpu_type=a100&gpu_count=1",
                           HTTP_HX_REQUEST="true").content.decode()
    assert "your project may use <strong>0 more</strong>" in check
    assert "Beyond the quota: vision-lab uses 4 of 4 a100 GPUs; 1 more would exceed it." in check
    response = researcher.post("/workloads/new/", launch_form(
        name="second notebook", cpu="6", max_runtime_minutes="90", use_home="on"))
    page = response.content.decode()
    assert response.status_code == 403
    alert = re.search(r'<div class="form-errors" role="alert" id="launch-errors">(.*?)</div>',
                      page, re.S).group(1)
    assert "vision-lab uses 4 of 4 a100 GPUs; 1 more would exceed the quota." in alert
    assert 'aria-describedby="launch-errors"' in page
    # everything typed is still there
    assert 'id="id_name" name="name" value="second notebook"' in page
    assert 'name="template" value="jupyter" checked' in page
    assert '<option value="a100" selected>' in page
    assert 'name="cpu" type="number" min="1" max="256" inputmode="numeric" value="6"' in page
    assert 'inputmode="numeric" value="90"' in page
    assert 'id="id_use_home" name="use_home" checked' in page
    assert not Workload.objects.filter(name="second notebook").exists()


def test_eight_t4_is_flagged_before_and_after_submitting(researcher, vision_lab):
    check = researcher.get("/workloads/new/check/?gpu_type=t4&gpu_count=8",
                           HTTP_HX_REQUEST="true").content.decode()
    assert f'<p class="check-note check-error"><strong>Can never run:</strong> {NEVER_FITS}</p>' \
        in check
    assert re.search(r"<strong>\d+ free</strong> of 4 t4", check)
    response = researcher.post("/workloads/new/", launch_form(gpu_type="t4", gpu_count="8"))
    page = response.content.decode()
    assert response.status_code == 400
    assert NEVER_FITS in field_error(page, "gpu_count")
    # the field points at its error; the summary links to the field
    assert re.search(r'id="id_gpu_count" name="gpu_count" type="number" min="1" max="64" '
                     r'inputmode="numeric" value="8" class="launch-check-input"\s+'
                     r'aria-describedby="launch-check err-gpu_count" aria-invalid="true"', page)
    assert f'<li><a href="#id_gpu_count">GPUs</a>: {NEVER_FITS}</li>' in page
    assert '<option value="t4" selected>' in page
    assert not Workload.objects.exists()


def test_the_launch_page_offers_an_image_only_where_the_template_takes_one(researcher,
                                                                          vision_lab, settings):
    settings.PORTAL_IMAGE_REGISTRIES = ["quay.io/jupyter"]
    assert 'name="image"' not in researcher.get("/workloads/new/?template=jupyter").content.decode()
    Template.objects.filter(slug="jupyter").update(image_replaceable=True)
    page = researcher.get("/workloads/new/?template=jupyter").content.decode()
    assert 'placeholder="quay.io/jupyter/pytorch-notebook:cuda12-python-3.12"' in page
    assert "from the site's registries: quay.io/jupyter" in page
    scipy = "quay.io/jupyter/scipy-notebook:2024-05-27"
    response = researcher.post("/workloads/new/", launch_form(name="scipy", image=scipy))
    assert response.status_code == 302
    assert Workload.objects.get(tenant=vision_lab, name="scipy").image == scipy
    response = researcher.post("/workloads/new/", launch_form(
        name="elsewhere", image="docker.io/library/python:3.12"))
    assert response.status_code == 400
    assert "Images must come from the site" in field_error(response.content.decode(), "image")


def test_the_launch_page_says_which_templates_the_project_may_not_run_as_root(researcher,
                                                                              vision_lab):
    page = researcher.get("/workloads/new/").content.decode()
    digits = re.search(r'<small id="desc-digits".*?</small>', page, re.S).group(0)
    assert "It may run as root, which vision-lab does not allow; an admin can." in digits
    jupyter = re.search(r'<small id="desc-jupyter".*?</small>', page, re.S).group(0)
    assert "root" not in jupyter
    vision_lab.allow_root_templates = True
    vision_lab.save(update_fields=["allow_root_templates"])
    assert "which vision-lab does not allow" not in researcher.get("/workloads/new/").content.decode()


def test_custom_batch_job_fields_become_argv_and_env(researcher, vision_lab):
    response = researcher.post("/workloads/new/", launch_form(
        name="train", template="custom", shown_template="custom", gpu_type="v100", kind="batch",
        image="registry.example.org/team/train:1.4", command="python\n-c\r\n",
        args='print("héllo; rm -rf /")\n--epochs=3', env="SEED=1\nMSG=a=b c", retries="2"))
    assert response.status_code == 302
    workload = Workload.objects.get(name="train")
    assert workload.kind == "batch" and workload.retries == 2
    assert workload.command == ["python", "-c"]
    assert workload.args == ['print("héllo; rm -rf /")', "--epochs=3"]
    assert workload.env == {"SEED": "1", "MSG": "a=b c"}


def test_field_errors_are_shown_next_to_their_fields(researcher, vision_lab):
    response = researcher.post("/workloads/new/", launch_form(
        name="  ", template="custom", shown_template="custom", gpu_count="0", env="NOT A LINE"))
    page = response.content.decode()
    assert response.status_code == 400
    assert field_error(page, "env") == "<p>Line 1 is not KEY=value.</p>"
    assert "This field may not be blank." in field_error(page, "name")
    assert "greater than or equal to 1" in field_error(page, "gpu_count")
    assert 'aria-describedby="hint-env err-env" aria-invalid="true">NOT A LINE</textarea>' in page
    assert '<li><a href="#id_name">Name</a>: This field may not be blank.</li>' in page
    # the checks across fields (image, kind) once the fields themselves are valid
    response = researcher.post("/workloads/new/", launch_form(
        template="custom", shown_template="custom", kind="service", image="bad image;rm",
        retries="1"))
    page = response.content.decode()
    assert response.status_code == 400
    assert field_error(page, "image")
    assert "Retries apply to batch jobs only." in field_error(page, "retries")
    assert "A service needs the port it listens on." in field_error(page, "port")
    assert 'value="bad image;rm"' in page and '<option value="service" selected>' in page
    assert not Workload.objects.exists()


CUSTOM_BATCH = {"template": "custom", "shown_template": "custom", "kind": "batch",
                "image": "busybox:1.36"}


# the API's bad requests (tests/workloads/test_launch_api.py) that a form can send: the page
# reads them with its own form, and the domain's rules give the same field its error
@pytest.mark.parametrize(("changes", "field"), [
    ({**CUSTOM_BATCH, "image": "ubuntu; rm -rf /"}, "image"),
    ({**CUSTOM_BATCH, "image": "$(id)"}, "image"),
    ({**CUSTOM_BATCH, "port": "80"}, "port"),
    ({**CUSTOM_BATCH, "kind": "service"}, "port"),
    ({**CUSTOM_BATCH, "image": ""}, "image"),
    ({"gpu_count": "0"}, "gpu_count"),
    ({"gpu_count": "two"}, "gpu_count"),
    ({"gpu_type": "h100"}, "gpu_type"),
    ({"template": "nope"}, "template"),
    ({"name": "   "}, "name"),
    ({**CUSTOM_BATCH, "env": "BAD NAME=x"}, "env"),
    ({"cpu": "100000"}, "cpu"),
    ({**CUSTOM_BATCH, "args": "a\x00b"}, "args"),
    ({**CUSTOM_BATCH, "args": "x" * 4097}, "args"),
    ({**CUSTOM_BATCH, "retries": "11"}, "retries"),
    ({"name": "invoice\u202eexe.pdf"}, "name"),
])
def test_the_form_refuses_what_the_api_refuses(researcher, vision_lab, changes, field):
    response = researcher.post("/workloads/new/", launch_form(**changes))
    assert response.status_code == 400
    assert field_error(response.content.decode(), field)
    assert not Workload.objects.exists()


def test_the_gpu_stacks_variables_are_refused_on_the_form(researcher, vision_lab):
    response = researcher.post("/workloads/new/", launch_form(
        name="escape", template="custom", shown_template="custom", kind="batch",
        image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        env="NVIDIA_VISIBLE_DEVICES=all\nNVIDIA_DRIVER_CAPABILITIES=all\nSEED=1"))
    assert response.status_code == 400
    errors = field_error(response.content.decode(), "env")
    assert "NVIDIA_VISIBLE_DEVICES is refused: the NVIDIA container runtime reads" in errors
    assert "NVIDIA_DRIVER_CAPABILITIES is refused" in errors
    assert not Workload.objects.exists()


def test_a_name_with_invisible_characters_is_refused_on_the_form(researcher, vision_lab):
    response = researcher.post("/workloads/new/", launch_form(name="note\u2066book\u2069"))
    assert response.status_code == 400
    assert "U+2066 LEFT-TO-RIGHT ISOLATE" in field_error(response.content.decode(), "name")
    assert not Workload.objects.exists()


def test_changing_the_template_refreshes_its_fields(researcher, vision_lab):
    # htmx: the custom fields appear, with the custom template's defaults
    partial = researcher.post("/workloads/new/fields/", launch_form(
        template="custom", cpu="4", memory="16"), HTTP_HX_REQUEST="true").content.decode()
    assert partial.startswith('<div id="template-fields">')
    assert 'name="shown_template" value="custom"' in partial and 'name="image"' in partial
    partial = researcher.post("/workloads/new/fields/", launch_form(
        template="tensorboard"), HTTP_HX_REQUEST="true").content.decode()
    assert 'name="cpu" type="number" min="1" max="256" inputmode="numeric" value="2"' in partial
    assert 'name="image"' not in partial
    # without JavaScript: the same through the form's refresh button, nothing launched
    page = researcher.post("/workloads/new/", launch_form(
        name="kept", template="custom", refresh="1")).content.decode()
    assert 'name="image"' in page and 'value="kept"' in page
    assert not Workload.objects.exists()


# --- who may do what --------------------------------------------------------------------------

def test_a_reader_sees_the_workloads_but_no_controls(vision_lab, as_user):
    workload = make_workload(vision_lab, "researcher", name="visible run")
    viewer = as_user("viewer")
    page = viewer.get("/workloads/").content.decode()
    assert "visible run" in page and "researcher" in page
    assert "/workloads/new/" not in page and "/stop/" not in page and "/delete/" not in page
    detail = viewer.get(f"/workloads/{workload.pk}/").content.decode()
    assert "<h1>visible run</h1>" in detail and "/stop/" not in detail
    assert "/workloads/new/" not in viewer.get("/").content.decode()
    assert viewer.get("/workloads/new/").status_code == 403
    assert viewer.post("/workloads/new/", launch_form()).status_code == 403
    assert viewer.get("/workloads/new/check/?gpu_type=a100&gpu_count=1").status_code == 403
    assert viewer.post(f"/workloads/{workload.pk}/stop/").status_code == 403
    assert viewer.post(f"/workloads/{workload.pk}/delete/").status_code == 403
    workload.refresh_from_db()
    assert workload.state == Workload.State.RUNNING and workload.deleted_at is None


def test_a_member_cannot_stop_anothers_workload_but_a_manager_can(vision_lab, as_user):
    lead = as_user("lead")
    researcher = as_user("researcher")
    leads = make_workload(vision_lab, "lead", name="lead run")
    own = make_workload(vision_lab, "researcher", name="own run")
    page = researcher.get("/workloads/").content.decode()
    lead_row = re.search(rf'<tr id="workload-{leads.pk}">.*?</tr>', page, re.S).group(0)
    own_row = re.search(rf'<tr id="workload-{own.pk}">.*?</tr>', page, re.S).group(0)
    assert "/stop/" not in lead_row and f"/workloads/{own.pk}/stop/" in own_row
    assert researcher.post(f"/workloads/{leads.pk}/stop/").status_code == 403
    assert researcher.post(f"/workloads/{leads.pk}/delete/").status_code == 403
    leads.refresh_from_db()
    assert leads.state == Workload.State.RUNNING
    # the manager stops the member's workload
    response = lead.post(f"/workloads/{own.pk}/stop/", {"next": "/workloads/"})
    assert response.status_code == 302 and response.url == "/workloads/"
    own.refresh_from_db()
    assert own.state == Workload.State.STOPPING and own.reason == "stopped by lead"
    # and the member deletes their own
    response = researcher.post(f"/workloads/{own.pk}/delete/", follow=True)
    assert "own run was deleted." in response.content.decode()
    assert f'id="workload-{own.pk}"' not in response.content.decode()
    own.refresh_from_db()
    assert own.deleted_at is not None


def test_another_tenants_workload_is_not_found(vision_lab, as_user, login):
    as_user("student", "nlp-lab")
    nlp = make_workload(Tenant.objects.get(name="nlp-lab"), "student", name="nlp run")
    researcher = as_user("researcher")  # a member of nlp-lab too, but in vision-lab now
    assert researcher.get(f"/workloads/{nlp.pk}/live/", HTTP_HX_REQUEST="true").status_code == 204
    # the workload page offers to switch to nlp-lab (tests/workloads/test_other_project_link.py)
    # and shows nothing of the workload meanwhile
    offer = researcher.get(f"/workloads/{nlp.pk}/").content.decode()
    assert 'id="other-project"' in offer and "nlp run" not in offer
    assert researcher.post(f"/workloads/{nlp.pk}/stop/").status_code == 404
    assert researcher.post(f"/workloads/{nlp.pk}/delete/").status_code == 404
    assert "nlp run" not in researcher.get("/workloads/").content.decode()
    viewer = as_user("viewer")
    assert viewer.get(f"/workloads/{nlp.pk}/").status_code == 404


# --- the list ---------------------------------------------------------------------------------

def test_the_list_is_empty_at_first(researcher):
    page = researcher.get("/workloads/").content.decode()
    assert 'No workloads yet — <a href="/workloads/new/">Launch one</a>' in page


def test_the_list_polls_only_while_something_is_active(researcher, vision_lab):
    workload = make_workload(vision_lab, "researcher", name="watched",
                             state=Workload.State.PENDING)
    page = researcher.get("/workloads/").content.decode()
    assert re.search(r'<tbody id="workload-rows" hx-get="/workloads/rows/" '
                     r'hx-trigger="every 3s" hx-swap="outerHTML">', page)
    assert '<small class="reason">Waiting for the cluster</small>' in page
    rows = researcher.get("/workloads/rows/?mine=true", HTTP_HX_REQUEST="true").content.decode()
    assert rows.startswith('<tbody id="workload-rows" hx-get="/workloads/rows/?mine=true" '
                           'hx-trigger="every 3s"')
    assert "watched" in rows
    # Stop comes back to the filtered list, not to the polled fragment
    assert '<input type="hidden" name="next" value="/workloads/?mine=true">' in rows
    live = researcher.get(f"/workloads/{workload.pk}/live/", HTTP_HX_REQUEST="true")
    assert f'<input type="hidden" name="next" value="/workloads/{workload.pk}/">' in \
        live.content.decode()
    Workload.objects.filter(pk=workload.pk).update(state=Workload.State.SUCCEEDED, reason="")
    rows = researcher.get("/workloads/rows/", HTTP_HX_REQUEST="true").content.decode()
    assert rows.startswith('<tbody id="workload-rows">') and "hx-trigger" not in rows
    assert '<span class="state state-succeeded" >succeeded</span>' in rows
    # the workload page stops polling too
    detail = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<div id="workload-live">' in detail and "every 3s" not in detail


def test_the_list_filters_mine_and_state(vision_lab, as_user):
    as_user("lead")
    researcher = as_user("researcher")
    make_workload(vision_lab, "lead", name="leads job")
    make_workload(vision_lab, "researcher", name="my stopped job", state=Workload.State.STOPPED)
    make_workload(vision_lab, "researcher", name="my running job")
    page = researcher.get("/workloads/?mine=true").content.decode()
    assert "my running job" in page and "my stopped job" in page and "leads job" not in page
    page = researcher.get("/workloads/?state=active").content.decode()
    assert "my running job" in page and "leads job" in page and "my stopped job" not in page
    page = researcher.get("/workloads/?state=stopped&mine=true").content.decode()
    assert "my stopped job" in page and "my running job" not in page
    page = researcher.get("/workloads/?state=failed").content.decode()
    assert "No workloads match this filter." in page


def test_the_open_button_opens_jupyter_without_its_token(researcher, vision_lab):
    # the proxy in front of the workload logs the user in and sends Jupyter its token itself:
    # a token in a URL would end up in browser history, logs and Referer headers
    workload = make_workload(vision_lab, "researcher", name="lab")
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<a class="button primary" href="http://192.168.1.245:8888/lab" ' \
           'target="_blank" rel="noopener noreferrer">Open' in page
    assert "192.168.1.245:8888" in page
    assert "tok-lab" not in page


def test_a_reader_sees_that_it_runs_but_not_how_to_get_in(researcher, vision_lab, as_user,
                                                         django_capture_on_commit_callbacks):
    """The notebook prints the URL with its token. The owner and managers
    read it in the logs on the page and its live part; a reader gets them redacted, and no
    Open button where the project's rule (members, by default) does not let readers in."""
    with django_capture_on_commit_callbacks(execute=True):
        researcher.post("/workloads/new/", launch_form(name="secret lab"))
    workload = Workload.objects.get(tenant=vision_lab, name="secret lab")
    token = workload.access_token

    def live(client, marker: str) -> str:
        def shown() -> str | None:
            page = client.get(f"/workloads/{workload.pk}/live/",
                              HTTP_HX_REQUEST="true").content.decode()
            return page if marker in page else None

        return eventually(shown, timeout=10, message=f"no {marker!r} on the live part of the page")

    for manager in (researcher, as_user("lead")):
        assert f"lab?token={token}" in live(manager, "lab?token=")
    viewer = as_user("viewer")
    assert "lab?token=[redacted]" in live(viewer, "lab?token=")
    page = viewer.get(f"/workloads/{workload.pk}/").content.decode()
    assert "lab?token=[redacted]" in page and token not in page
    # a running notebook: its owner may open it, the reader is not offered the way in
    running = make_workload(vision_lab, "researcher", name="running lab")
    for client, shown in ((researcher, True), (viewer, False)):
        detail = client.get(f"/workloads/{running.pk}/").content.decode()
        rows = client.get("/workloads/").content.decode()
        row = re.search(rf'<tr id="workload-{running.pk}">.*?</tr>', rows, re.S).group(0)
        assert ('href="http://192.168.1.245:8888/lab"' in detail) is shown
        assert ('href="http://192.168.1.245:8888/lab"' in row) is shown
        assert "Behind the portal's login, which lets in members of the project" in detail


# --- dashboard --------------------------------------------------------------------------------

def test_the_dashboard_shows_my_active_workloads_and_the_quota_use(researcher, vision_lab):
    make_workload(vision_lab, "researcher", name="dash run", gpu_count=2)
    make_workload(vision_lab, "researcher", name="old run", state=Workload.State.FAILED)
    page = researcher.get("/").content.decode()
    my_active = re.search(r'<ul class="workload-list" id="my-active">.*?</ul>', page, re.S)
    assert "dash run" in my_active.group(0) and "old run" not in my_active.group(0)
    assert 'data-gpu-type="a100">2 / 4<' in page
    assert 'data-total>2 / 8<' in page
    assert '<a class="button primary" href="/workloads/new/">Launch a workload</a>' in page


# --- the cluster unreachable ------------------------------------------------------------------

def test_pages_render_with_a_banner_when_the_cluster_is_unreachable(researcher, vision_lab,
                                                                    cluster, settings, tmp_path):
    workload = make_workload(vision_lab, "researcher", name="stranded")
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(cluster.url,
                                                                 "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)
    launch = researcher.get("/workloads/new/")
    assert launch.status_code == 200
    page = launch.content.decode()
    assert '<div class="banner banner-warning" role="status" id="cluster-note">' \
           "The cluster is unreachable right now: free GPUs are not known." in page
    assert "free unknown · quota: 3 more" in page  # the quota is the portal's own
    detail = researcher.get(f"/workloads/{workload.pk}/")
    assert detail.status_code == 200
    assert "The cluster is unreachable right now: the logs cannot be read." in \
        detail.content.decode()
    assert "<h1>stranded</h1>" in detail.content.decode()
    assert researcher.get("/workloads/").status_code == 200
    assert researcher.get("/").status_code == 200
    check = researcher.get("/workloads/new/check/?gpu_type=a100&gpu_count=1").content.decode()
    assert "Free a100 GPUs unknown" in check
    # a launch is still admitted: the create task retries until the cluster answers
    response = researcher.post("/workloads/new/", launch_form(name="queued"))
    assert response.status_code == 302
    assert Workload.objects.get(name="queued").state == Workload.State.SUBMITTED


def test_public_is_offered_only_where_an_admin_allows_it_and_the_page_says_who_gets_in(
        researcher, vision_lab):
    from access.models import TenantServiceAccess

    assert 'name="public"' not in researcher.get("/workloads/new/").content.decode()
    TenantServiceAccess.objects.update_or_create(tenant=vision_lab,
                                                 defaults={"who": "members", "allow_public": True})
    assert 'id="id_public" name="public"' in researcher.get("/workloads/new/").content.decode()
    response = researcher.post("/workloads/new/", launch_form(name="open demo", public="on"))
    assert response.status_code == 302, response.content.decode()[:3000]
    workload = Workload.objects.get(name="open demo")
    assert workload.access.public
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert "<strong class=\"check-warning\">Public</strong>" in page
    protected = researcher.post("/workloads/new/", launch_form(name="closed"))
    assert protected.status_code == 302
    page = researcher.get(protected.url).content.decode()
    assert "Behind the portal's login, which lets in members of the project" in page
    assert f"gpuctl token {Workload.objects.get(name='closed').pk}" in page


def test_a_queued_workload_says_where_it_stands(researcher, vision_lab):
    """Queueing is off on kubesim, but a queued row (one recorded while it was on) still says
    where it stands: Kueue's place when it can be read (not here), and the estimate."""
    workload = make_workload(vision_lab, "researcher", name="waiting", state=Workload.State.QUEUED)
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    line = re.search(r'<span class="queue" id="workload-queue">(.*?)</span>', page)
    assert line, "no queue line"
    # the demo cluster has free A100s: nothing holds it back
    assert line.group(1) == "queued, starting now"
    rows = researcher.get("/workloads/?state=queued").content.decode()
    assert '<small class="queue">queued, starting now</small>' in rows
