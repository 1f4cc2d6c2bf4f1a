"""What a launch may add to a template's program (catalogue/options.py) and which variables
it may not set there (catalogue/environment.py): a launch's `args` are appended to a fixed
template's own, only as the options its admin declared, never replacing its program; the
custom template takes any. Real Keystone logins, PostgreSQL and kubesim over HTTP."""

import pytest
from kubernetes import client as k8s

from audit.models import AuditRecord
from catalogue.models import Template
from catalogue.options import allowed_option_problem, allowed_options_problems
from catalogue.services import CatalogueRefused, template_create, template_update
from tests.workloads.api_calls import launch, vision_lab_ready
from tests.workloads.test_admin_pages import admin, template_form  # noqa: F401
from tests.workloads.test_pages import field_error, launch_form, researcher, vision_lab  # noqa: F401
from workloads.models import Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "My notebook", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
TENSORBOARD_ARGS = ["--logdir", "/home/portal/logs", "--bind_all", "--port", "6006"]


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


# --- the rule ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "--port", "--host", "--ip", "--bind_all", "--bindAll", "--ServerApp.port",
    "--ServerApp.ip", "--NotebookApp.port_retries", "--hostname", "--listen-address",
    "--unix-socket", "--ServerApp.token", "--IdentityProvider.token", "--ServerApp.password",
    "-p", "-h", "--po", "--ho", "--bi",
])
def test_options_that_choose_where_it_listens_or_its_login_are_never_allowed(name):
    assert "may never be added by researchers" in allowed_option_problem(name)


@pytest.mark.parametrize("name", ["--logdir", "--reload_interval", "--samples_per_plugin",
                                  "--ServerApp.root_dir", "--window_title", "-v"])
def test_other_options_may_be_declared(name):
    assert allowed_option_problem(name) is None


@pytest.mark.parametrize("name", ["--logdir=/x", "logdir", "--", "--log dir", "---x", "--x.",
                                  "-" + "x" * 100])
def test_a_declared_option_is_a_name_without_a_value(name):
    assert allowed_option_problem(name)


def test_options_need_a_program_to_follow():
    """A template without command or arguments runs the image's own command: options would
    replace it (DIGITS). The custom template declares none: it takes any."""
    assert allowed_options_problems(["--logdir"], command=[], args=[], custom=False) == [
        "The template has neither a command nor arguments: options added by a launch would "
        "replace the image's own command. Give the command first."]
    assert allowed_options_problems(["--logdir"], command=[], args=[], custom=True)
    assert allowed_options_problems(["--logdir", "--logdir"], command=["tb"], args=[],
                                    custom=False) == ["An option is declared twice."]
    assert allowed_options_problems(["--logdir"], command=["tb"], args=[], custom=False) == []


def test_the_seeded_tensorboard_declares_its_logs_and_the_others_nothing(db):
    declared = dict(Template.objects.values_list("slug", "allowed_args"))
    assert declared == {"jupyter": [], "digits": [], "custom": [],
                        "tensorboard": ["--logdir", "--reload_interval"]}


# --- the API ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("template", "args"), [
    ("jupyter", ["sh", "-c", "id"]),  # replaced start-notebook.py: any shell
    ("digits", ["sh", "-c", "id"]),  # replaced the image's command, as root
    ("jupyter", ["--ServerApp.port=4180"]),
    ("tensorboard", ["--port", "4180"]),  # the proxy's port
    ("tensorboard", ["--port=4180"]),
    ("tensorboard", ["--logdir", "--port=4180"]),
    ("tensorboard", ["--bind_all"]),
    ("tensorboard", ["--logdir", "/home/portal/other"]),  # a value is NAME=value, one item
    ("tensorboard", ["--logdirx=/x"]),
])
def test_args_a_template_does_not_declare_are_refused(vision, api_headers, template, args):
    vision.allow_root_templates = True  # DIGITS runs as root: only args refuse it here
    vision.save(update_fields=["allow_root_templates"])
    response = launch(api_headers("researcher"), {**JUPYTER, "template": template,
                                                  "args": args})
    assert response.status_code == 400, response.json()
    assert set(response.json()["fields"]) == {"args"}, response.json()
    assert not Workload.objects.exists()


def test_declared_options_are_appended_to_the_templates_own(vision, api_headers, eager_celery,
                                                            cluster):
    response = launch(api_headers("researcher"), {
        **JUPYTER, "template": "tensorboard",
        "args": ["--logdir=/home/portal/runs", "--reload_interval=30"]})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    expected = [*TENSORBOARD_ARGS, "--logdir=/home/portal/runs", "--reload_interval=30"]
    assert workload.launch_spec["args"] == expected
    deployment = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        workload.object_name, vision.namespace)
    app = deployment.spec.template.spec.containers[0]
    assert (app.command, app.args) == (["tensorboard"], expected)


def test_the_custom_template_takes_any_args(vision, api_headers, eager_celery, cluster):
    args = ["-c", "import os; print(os.getuid())", "--port", "4180"]
    response = launch(api_headers("researcher"), {
        **JUPYTER, "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "command": ["python"], "args": args})
    assert response.status_code == 201, response.json()
    assert Workload.objects.get(pk=response.json()["id"]).launch_spec["args"] == args


def test_the_templates_api_says_what_a_launch_may_add(vision, api_headers):
    from django.test import Client

    rows = Client().get("/api/v1/templates/", **api_headers("researcher")).json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {row["slug"]: row["allowed_args"] for row in rows} == {
        "jupyter": [], "digits": [], "custom": [],
        "tensorboard": ["--logdir", "--reload_interval"]}


@pytest.mark.parametrize("name", [
    "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONUSERBASE",
    "LD_BIND_NOW", "GCONV_PATH", "GLIBC_TUNABLES", "PATH", "HOME", "BASH_ENV", "ENV",
    "SHELLOPTS", "PS4", "PROMPT_COMMAND", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JUPYTER_CONFIG_DIR", "IPYTHONDIR",
])
def test_program_hooks_are_refused_on_a_fixed_program(vision, api_headers, name):
    response = launch(api_headers("researcher"), {**JUPYTER, "env": {name: "/home/portal/x"}})
    assert response.status_code == 400, response.json()
    assert response.json()["fields"]["env"] == [
        f"{name} is refused on a template with a fixed program: it changes what the template "
        "runs. Use the custom template to run your own."]
    assert not Workload.objects.exists()


def test_program_hooks_are_the_custom_templates_own_business(vision, api_headers):
    env = {"PYTHONPATH": "/home/portal/lib", "PATH": "/home/portal/bin:/usr/bin",
           "NODE_OPTIONS": "--max-old-space-size=4096", "CUDA_VISIBLE_DEVICES": "0"}
    response = launch(api_headers("researcher"), {
        **JUPYTER, "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "env": env})
    assert response.status_code == 201, response.json()
    # and what changes nothing of the program passes on a fixed one
    response = launch(api_headers("researcher"), {**JUPYTER, "name": "nb",
                                                  "env": {"SEED": "1", "OMP_NUM_THREADS": "4"}})
    assert response.status_code == 201, response.json()


# --- the launch page --------------------------------------------------------------------------

def test_the_launch_page_shows_and_takes_the_declared_options(researcher, vision_lab):  # noqa: F811
    page = researcher.get("/workloads/new/?template=tensorboard").content.decode()
    assert 'name="args"' in page
    assert "<code>--logdir</code>, <code>--reload_interval</code>" in page
    jupyter = researcher.get("/workloads/new/?template=jupyter").content.decode()
    assert 'name="args"' not in jupyter
    response = researcher.post("/workloads/new/", launch_form(
        name="board", template="tensorboard", shown_template="tensorboard",
        args="--logdir=/home/portal/runs\n"))
    assert response.status_code == 302
    assert Workload.objects.get(name="board").launch_spec["args"] == [
        *TENSORBOARD_ARGS, "--logdir=/home/portal/runs"]


def test_the_launch_page_refuses_an_undeclared_option(researcher, vision_lab):  # noqa: F811
    response = researcher.post("/workloads/new/", launch_form(
        name="board", template="tensorboard", shown_template="tensorboard",
        args="--port=4180"))
    assert response.status_code == 400
    assert "is not an option the TensorBoard template lets you add" in field_error(
        response.content.decode(), "args")
    assert not Workload.objects.exists()


# --- the admin's template ---------------------------------------------------------------------

def test_an_admin_declares_options_and_never_the_port(admin):  # noqa: F811
    tensorboard = Template.objects.get(slug="tensorboard")
    response = admin.post(f"/admin/templates/{tensorboard.pk}/", template_form(
        tensorboard, allowed_args="--logdir\n--port\n--ServerApp.ip"))
    assert response.status_code == 400
    errors = field_error(response.content.decode(), "allowed_args")
    assert "--port may never be added by researchers" in errors
    assert "--ServerApp.ip may never be added by researchers" in errors
    digits = Template.objects.get(slug="digits")
    response = admin.post(f"/admin/templates/{digits.pk}/", template_form(
        digits, allowed_args="--logdir"))
    assert response.status_code == 400
    assert "neither a command nor arguments" in field_error(response.content.decode(),
                                                            "allowed_args")
    assert not AuditRecord.objects.filter(action="template.update").exists()
    response = admin.post(f"/admin/templates/{tensorboard.pk}/", template_form(
        tensorboard, allowed_args=" --logdir \n\n--samples_per_plugin\n"))
    assert response.status_code == 302
    tensorboard.refresh_from_db()
    assert tensorboard.allowed_args == ["--logdir", "--samples_per_plugin"]
    record = AuditRecord.objects.get(action="template.update", target="template/tensorboard")
    assert record.after["allowed_args"] == ["--logdir", "--samples_per_plugin"]


def test_the_catalogue_services_refuse_what_the_form_refuses(db):
    tensorboard = Template.objects.get(slug="tensorboard")
    with pytest.raises(CatalogueRefused, match="--host may never be added"):
        template_update(template=tensorboard, acting_user=None,
                        changes={"allowed_args": ["--host"]})
    with pytest.raises(CatalogueRefused, match="neither a command nor arguments"):
        template_update(template=tensorboard, acting_user=None,
                        changes={"command": [], "args": []})  # its options would be the program
    with pytest.raises(CatalogueRefused, match="neither a command nor arguments"):
        template_create(acting_user=None, slug="digits2",
                        values={"name": "D", "image": "nvcr.io/nvidia/digits:21.02-tensorflow-py3",
                                "port": 5000, "allowed_args": ["--verbose"]})
    assert Template.objects.get(slug="tensorboard").allowed_args == ["--logdir",
                                                                     "--reload_interval"]
    assert not Template.objects.filter(slug="digits2").exists()


def test_a_template_saved_with_a_listening_option_still_cannot_pass_it(vision, api_headers):
    """A row written past the services (by hand, or before this rule): the launch checks the
    option's words again."""
    Template.objects.filter(slug="tensorboard").update(allowed_args=["--logdir", "--port"])
    response = launch(api_headers("researcher"), {**JUPYTER, "template": "tensorboard",
                                                  "args": ["--port=4180"]})
    assert response.status_code == 400
    assert "args" in response.json()["fields"]
