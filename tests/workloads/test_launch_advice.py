"""One launch advice (workloads/advice.py): the launch page's live check and `POST
workloads/check/` tell the same notes, in the same order, for the same launch — what the cluster
could never run, the quota, a group's nodes, the budget, the calendar — and a check reads what
its advisors share once: its queries do not grow with the calendar's windows and reservations.
Real Keystone users, PostgreSQL, kubesim's inventory (two 8-GPU a100 nodes, 4-GPU t4 ones)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from budgets.models import Budget
from calendars.models import MaintenanceWindow, Reservation
from catalogue.models import GpuType, Template
from tenants.models import Tenant
from tests.support.cluster import cluster_cache_caught_up
from tests.workloads.api_calls import vision_lab_ready
from workloads.advice import launch_advice, launch_context

pytestmark = pytest.mark.django_db
# what a check reads while the calendar is unchanged
CHECK_QUERIES = 10

PROGRAM = ["python", "train.py"]
# (template, GPU type, GPUs per node, nodes, maximum runtime in minutes or None)
LAUNCHES = [
    ("jupyter", "a100", 1, 1, None),  # the window's info, the budget's, the capacity outlook
    ("jupyter", "a100", 1, 1, 30),  # done before the window
    ("jupyter", "a100", 6, 1, 120),  # beyond the a100 quota, crossing the budget
    ("jupyter", "t4", 8, 1, 60),  # no t4 node has 8: can never run (and beyond the quota)
    ("jupyter", "v100", 2, 1, 600),
    ("custom", "v100", 3, 1, 60),  # another template, another type
    ("pytorch-ddp", "a100", 4, 2, 60),  # a group: no engine here, its summary, beyond quota
    ("mpi", "a100", 8, 3, 60),  # a group no three nodes can hold
]


@pytest.fixture
def vision(login, gpu_types, cluster) -> Tenant:
    """vision-lab with the demo quota, a soft budget of 3 GPU-hours, an a100 node's
    maintenance in two hours and nlp-lab's reservation of a100s after it."""
    tenant = vision_lab_ready(login)
    cluster_cache_caught_up()
    Budget.objects.create(tenant=tenant, gpu_hours=3, hard=False)
    now = timezone.now()
    window(now + dt.timedelta(hours=2), 8)
    nlp = Tenant.objects.get(name="nlp-lab")
    Reservation.objects.create(tenant=nlp, gpu_type=GpuType.objects.get(slug="a100"), count=4,
                               start=now + dt.timedelta(hours=5),
                               end=now + dt.timedelta(hours=7), note="course")
    return tenant


def window(start: dt.datetime, gpus: int) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        nodes=["gpu-a100-1"], start=start.replace(microsecond=0),
        end=(start + dt.timedelta(hours=2)).replace(microsecond=0), reason="driver update",
        affected={"gpu-a100-1": {"gpu_type": "a100", "gpus": gpus}})


def page_notes(client: Client, template: str, gpu_type: str, gpus: int, nodes: int,
               minutes: int | None) -> list[tuple[str, str]]:
    response = client.get("/workloads/new/check/", {
        "template": template, "gpu_type": gpu_type, "gpu_count": str(gpus),
        "nodes": str(nodes), "max_runtime_minutes": str(minutes or "")})
    assert response.status_code == 200
    return list(response.context["check"]["notes"])


def api_notes(headers: dict, template: str, gpu_type: str, gpus: int, nodes: int,
              minutes: int | None) -> list[tuple[str, str]]:
    body = {"name": "probe", "template": template, "gpu_type": gpu_type, "gpu_count": gpus,
            "nodes": nodes, "max_runtime_minutes": minutes}
    if template in ("custom", "pytorch-ddp", "mpi"):
        body["command"] = PROGRAM
    if template == "custom":
        body.update(image="busybox", kind="batch")
    response = Client().post("/api/v1/workloads/check/", body, content_type="application/json",
                             **headers)
    assert response.status_code == 200, response.json()
    return [(note["level"], note["message"]) for note in response.json()["notes"]]


def test_the_page_and_the_api_advise_the_same(vision, as_user, api_headers):
    page, headers = as_user("researcher"), api_headers("researcher")
    told = {}
    for launch in LAUNCHES:
        on_the_page = page_notes(page, *launch)
        assert on_the_page == api_notes(headers, *launch), launch
        told[launch] = on_the_page
    # the table reaches every advisor and each kind of note
    levels = {level for notes in told.values() for level, _ in notes}
    assert levels == {"error", "warning", "info"}
    texts = " | ".join(text for notes in told.values() for _, text in notes)
    for said in ("No t4 node has 8 GPUs (the largest has 4); this request can never run.",
                 "Needs 3 nodes with 8 a100 GPUs each; the cluster has 2 such nodes",
                 "Distributed training is unavailable",  # kubesim runs no JobSet
                 "2 nodes × 4 a100: 8 GPUs of the quota",
                 "Beyond the quota: vision-lab uses 0 of 4 a100 GPUs; 6 more would exceed it.",
                 "would cross what is left of vision-lab's budget",
                 "would cross maintenance #",
                 "(maintenance), "):
        assert said in texts, said
    assert not [note for note in told[("jupyter", "a100", 1, 1, 30)]
                if "maintenance #" in note[1]]


def test_the_page_check_reads_the_gpu_types_once(vision, as_user):
    """The launch page's rows and the capacity view behind its check share one read of the
    catalogue's GPU types."""
    page = as_user("researcher")
    page_notes(page, "jupyter", "a100", 1, 1, 60)
    with CaptureQueriesContext(connection) as captured:
        page_notes(page, "jupyter", "a100", 1, 1, 60)
    assert sum('FROM "workloads_gputype"' in q["sql"] for q in captured.captured_queries) == 1


def test_a_check_reads_the_calendar_once_whatever_it_holds(vision, django_assert_max_num_queries):
    """The advisors share one read of the tenant's quota and holdings, the cluster's capacity
    and the calendar's windows and reservations: more of them cost no more queries."""
    user = get_user_model().objects.get(name="researcher")
    a100 = GpuType.objects.get(slug="a100")
    jupyter = Template.objects.get(slug="jupyter")

    def check() -> list[tuple[str, str]]:
        tenant = Tenant.objects.get(pk=vision.pk)  # as a request brings it
        return launch_advice(launch_context(tenant=tenant, user=user, gpu_type=a100,
                                            template=jupyter, gpus_per_node=1))

    # the quota, its GPU limits with its adjustments, the holdings, the capacity view's three
    # sources, the budget, the budget's use, the calendar's version; and on the first check
    # after the calendar changed, its live windows, the type's reservations and their released
    # occurrences (held in the process until the calendar changes again)
    with django_assert_max_num_queries(CHECK_QUERIES + 3):
        first = check()
    with django_assert_max_num_queries(CHECK_QUERIES):
        assert check() == first
    assert any("maintenance #" in text for _, text in first)
    now = timezone.now()
    nlp = Tenant.objects.get(name="nlp-lab")
    for hours in range(3, 12):
        window(now + dt.timedelta(hours=hours, minutes=30), 1)
        Reservation.objects.create(tenant=nlp, gpu_type=a100, count=1,
                                   start=now + dt.timedelta(hours=hours),
                                   end=now + dt.timedelta(hours=hours + 1), note="more")
    with django_assert_max_num_queries(CHECK_QUERIES + 3):
        more = check()
    assert len(more[-1][1]) > len(first[-1][1])  # the outlook names the new changes
    with django_assert_max_num_queries(CHECK_QUERIES):
        assert check() == more
