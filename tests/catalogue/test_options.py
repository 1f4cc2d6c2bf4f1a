"""What a launch may add to a template's program (catalogue/options.py): the rule, the seeded
templates' declarations, and the admin declaring options on the template page and through the
catalogue's services (what a launch then may pass: tests/workloads/test_launch_options.py)."""

import pytest

from audit.models import AuditRecord
from catalogue.models import Template
from catalogue.options import allowed_option_problem, allowed_options_problems
from catalogue.services import CatalogueRefused, template_create, template_update
from tests.support.pages import field_error, template_form

pytestmark = pytest.mark.django_db


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
    assert declared == {"jupyter": [], "digits": [], "custom": [], "pytorch-ddp": [],
                        "mpi": [], "tensorboard": ["--logdir", "--reload_interval"],
                        "code-server": []}


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
