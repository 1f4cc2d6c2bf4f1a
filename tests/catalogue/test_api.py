"""The catalogue's API (catalogue/api/): GET /api/v1/gpu-types/ with the cluster's live capacity
and free GPUs, GET /api/v1/templates/ with what a launch may add. Real Keystone tokens,
PostgreSQL and kubesim over HTTP (the GPU types' test re-runs on the real control plane:
tests/realcluster/test_launch_api.py)."""

import pytest
from django.test import Client

from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "My notebook", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def vision(login, gpu_types, cluster):
    """vision-lab with the demo quota and its namespace provisioned."""
    return vision_lab_ready(login)


def test_gpu_types_report_capacity_and_free(vision, api_headers, eager_celery, cluster):
    headers = api_headers("researcher")
    workload_id = launch(headers, {**JUPYTER, "gpu_count": 2}).json()["id"]
    # Wait until the scheduler has bound its pod (then the pods hold 2 a100s) and the portal's
    # view of the pods has caught up. The cluster is the session's: the tests before this one
    # waited for their own pods to be gone (tests/realcluster/conftest.py), so every count here
    # is this test's own; one read for all of them, so that they describe one moment.
    rows: dict = {}

    def counted() -> dict:
        rows.clear()
        rows.update({r["slug"]: r for r in Client().get("/api/v1/gpu-types/", **headers).json()})
        a100, t4 = rows["a100"], rows["t4"]
        assert (a100["allocated"], a100["free"], a100["capacity"], a100["allocatable"]) == (
            2, 14, 16, 16)
        assert a100["largest_free_block"] == 8  # the other a100 node is untouched
        assert (t4["largest_node"], t4["largest_free_block"], t4["free"]) == (4, 4, 4)
        return rows

    eventually(counted, timeout=20, interval=0.2,
               message=lambda: f"the GPU counts are not this test's alone: {rows}")
    assert Workload.objects.get(pk=workload_id).gpu_count == 2
    templates = [t["slug"] for t in Client().get("/api/v1/templates/", **headers).json()]
    assert templates == ["jupyter", "digits", "tensorboard", "custom", "pytorch-ddp", "mpi",
                         "code-server"]


def test_the_templates_api_says_what_a_launch_may_add(vision, api_headers):
    rows = Client().get("/api/v1/templates/", **api_headers("researcher")).json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {row["slug"]: row["allowed_args"] for row in rows} == {
        "jupyter": [], "digits": [], "custom": [], "pytorch-ddp": [], "mpi": [],
        "code-server": [],
        "tensorboard": ["--logdir", "--reload_interval"]}
