"""A launch the cluster could not take is refused up front (400, naming the field): a variable's
name past MAX_ENV_NAME, an environment past MAX_ENV_TOTAL, the command, arguments and
environment together past MAX_LAUNCH_BYTES. Before, a 10,000-character name and a 2.2 MB
environment were admitted and then failed in the cluster. The page's form refuses the same."""

import pytest

from catalogue.environment import MAX_ENV_NAME, MAX_ENV_TOTAL, MAX_ENV_VALUE
from tests.support.pages import field_error, launch_form
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import Workload
from workloads.validation import MAX_LAUNCH_BYTES

pytestmark = pytest.mark.django_db

CUSTOM = {"name": "big", "template": "custom", "kind": "batch", "image": "python:3.12-slim",
          "gpu_type": "a100", "gpu_count": 1}
BIG_ENV = {f"V{i}": "x" * MAX_ENV_VALUE for i in range(70)}  # 2.2 MB, each value in bounds


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"env": {"A" * 10_000: "1"}}, "env", f"is longer than {MAX_ENV_NAME} characters"),
    ({"env": BIG_ENV}, "env", f"at most {MAX_ENV_TOTAL // 1024} KiB"),
    ({"args": ["x" * 4000] * 100}, "args", f"at most {MAX_LAUNCH_BYTES // 1024} KiB"),
    ({"command": ["x" * 4000] * 50, "args": ["y" * 4000] * 20,
      "env": {f"V{i}": "z" * 1000 for i in range(100)}}, "command",
     f"at most {MAX_LAUNCH_BYTES // 1024} KiB"),
])
def test_a_launch_past_the_bounds_is_400_naming_the_field(vision, api_headers, body, field,
                                                          message):
    response = launch(api_headers("researcher"), {**CUSTOM, **body})
    assert response.status_code == 400, response.content[:300]
    messages = response.json()["fields"][field]
    assert any(message in text for text in messages), messages
    assert not Workload.objects.exists()


def test_a_launch_within_the_bounds_is_admitted(vision, api_headers):
    env = {"N" * MAX_ENV_NAME: "1", **{f"V{i}": "x" * 30_000 for i in range(4)}}
    response = launch(api_headers("researcher"), {**CUSTOM, "env": env,
                                                  "args": ["a" * 4000] * 30})
    assert response.status_code == 201, response.content[:300]


def test_the_form_refuses_the_same(researcher, vision_lab):  # noqa: F811
    form = {"template": "custom", "shown_template": "custom", "kind": "batch",
            "image": "busybox:1.36"}
    response = researcher.post("/workloads/new/", launch_form(**form, env=f"{'A' * 10_000}=1"))
    assert response.status_code == 400
    assert f"is longer than {MAX_ENV_NAME} characters" in field_error(
        response.content.decode(), "env")
    big = "\n".join(f"{key}={value}" for key, value in BIG_ENV.items())
    response = researcher.post("/workloads/new/", launch_form(**form, env=big))
    assert response.status_code == 400
    assert f"at most {MAX_ENV_TOTAL // 1024} KiB" in field_error(response.content.decode(), "env")
    assert not Workload.objects.exists()


@pytest.mark.parametrize("field", ["gpu_count", "cpu", "memory", "max_runtime_minutes"])
def test_the_forms_figures_are_ascii_digits(researcher, vision_lab, field):  # noqa: F811
    """Django's IntegerField reads "\u0661" as 1: the form takes ASCII digits only, as the API
    does."""
    response = researcher.post("/workloads/new/", launch_form(**{field: "\u0661"}))
    assert response.status_code == 400
    assert field_error(response.content.decode(), field)
    assert not Workload.objects.exists()
