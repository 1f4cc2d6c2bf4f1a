"""What a launch may add to a template's program (catalogue/options.py) and which variables
it may not set there (catalogue/environment.py): a launch's `args` are appended to a fixed
template's own, only as the options its admin declared, never replacing its program; the
custom template takes any. Real Keystone logins, PostgreSQL and kubesim over HTTP. (The rule
itself, and the admin declaring options: tests/catalogue/test_options.py.)"""

import pytest
from kubernetes import client as k8s

from catalogue.models import Template
from tests.support.pages import field_error, launch_form
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "My notebook", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
TENSORBOARD_ARGS = ["--logdir", "/home/portal/logs", "--bind_all", "--port", "6006"]


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


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


def test_a_template_saved_with_a_listening_option_still_cannot_pass_it(vision, api_headers):
    """A row written past the services (by hand, or before this rule): the launch checks the
    option's words again."""
    Template.objects.filter(slug="tensorboard").update(allowed_args=["--logdir", "--port"])
    response = launch(api_headers("researcher"), {**JUPYTER, "template": "tensorboard",
                                                  "args": ["--port=4180"]})
    assert response.status_code == 400
    assert "args" in response.json()["fields"]
