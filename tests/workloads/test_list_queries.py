"""The workload list's database cost does not grow with its length (no query per row)."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.fixtures.factories import make_workload
from tests.workloads.api_calls import vision_lab_ready
from workloads.models import Workload

pytestmark = pytest.mark.django_db


def queries_of_a_list(headers) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = Client().get("/api/v1/workloads/", **headers)
    assert response.status_code == 200
    return response.json()["count"], [q["sql"] for q in captured.captured_queries]


def test_a_longer_list_makes_no_more_queries(login, gpu_types, cluster, api_headers):
    vision = vision_lab_ready(login)
    headers = api_headers("researcher")
    # every kind of row: running, queued (its place and estimate), pending, finished
    states = [Workload.State.RUNNING, Workload.State.QUEUED, Workload.State.PENDING,
              Workload.State.SUCCEEDED]

    def add(count: int) -> None:
        for i in range(count):
            make_workload(vision, "researcher", name=f"w{Workload.objects.count()}",
                          state=states[i % len(states)])

    add(4)
    queries_of_a_list(headers)  # the token validated, the tenant recorded: warm
    count, four = queries_of_a_list(headers)
    add(16)
    more, twenty = queries_of_a_list(headers)
    assert (count, more) == (4, 20)
    assert len(twenty) == len(four), "\n".join(twenty)
