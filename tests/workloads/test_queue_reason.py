"""Why Kueue holds a queued workload, on its page, in the API and in gpuctl: from Kueue's events
the tracker recorded as the workload's (no request to the cluster), in the portal's words with
Kueue's own text beside them, never another project's names."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.utils import timezone
from django.utils.html import escape

from gpuctl.commands.workload import print_workload
from kube.client import KubeError
from tests.support.pages import make_workload
from workloads.api.serializers import WorkloadSerializer
from workloads.models import Workload, WorkloadEvent
from workloads.queue import kueue_reasons, queue_places

pytestmark = pytest.mark.django_db

SHORT = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
         "in flavor gpu-a100, 2 more needed")
PREEMPTED = ("Preempted to accommodate a workload (UID: 6f1c, JobUID: 0d9e) due to prioritization "
             "in the ClusterQueue; preemptor path: /gpu-portal/gp-rival; preemptee path: "
             "/gpu-portal/gp-rival; preemptor effective priority: 1000 (base: 1000, boost: 0)")


def said(workload: Workload, reason: str, message: str, source: str = "kueue-admission",
         seconds: int = 0) -> None:
    WorkloadEvent.objects.create(workload=workload, reason=reason, message=message,
                                 source=source, type="Warning",
                                 at=timezone.now() + dt.timedelta(seconds=seconds))


def test_the_page_the_api_and_gpuctl_say_why_kueue_holds_it(researcher, vision_lab, cluster):
    workload = make_workload(vision_lab, "researcher", name="big", kind="batch", port=None,
                             gpu_count=4, state=Workload.State.QUEUED)
    said(workload, "Pending", SHORT)
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    words = ("Waiting for 2 more a100 nvidia.com/gpu: the project&#x27;s quota and what it may "
             "borrow are in use.")
    assert f'<p class="queue-why" id="workload-queue-why">{words}' in page
    assert f'<span class="muted" id="workload-kueue-message">Kueue: {escape(SHORT)}</span>' \
        in page
    data = WorkloadSerializer(workload).data
    assert data["queue_reason"].startswith("Waiting for 2 more a100")
    assert data["queue_kueue_message"] == SHORT
    out = io.StringIO()
    print_workload(data, out)
    assert f"queue_kueue_message  {SHORT}\n" in out.getvalue()
    assert "queue_reason         Waiting for 2 more a100" in out.getvalue()


def test_a_preemption_says_by_what_priority_and_names_no_other_project(vision_lab):
    workload = make_workload(vision_lab, "researcher", name="low", kind="batch", port=None,
                             state=Workload.State.QUEUED)
    said(workload, "QuotaReserved", "Quota reserved in ClusterQueue gp-vision-lab", seconds=-9)
    said(workload, "Preempted", PREEMPTED, seconds=-5)
    # the portal's own notice of a reclaim is no Kueue text
    said(workload, "Preempted", "Its GPUs were borrowed", source="queue", seconds=-4)
    why = kueue_reasons([workload])[workload.pk]
    assert why.reason.startswith("Preempted by a workload of higher priority (priority 1000)")
    assert "gp-rival" not in why.message and "6f1c" not in why.message
    # admitted again: nothing holds it any more
    said(workload, "Admitted", "Admitted by ClusterQueue gp-vision-lab", seconds=-1)
    assert kueue_reasons([workload]) == {}


class WithoutVisibility:
    """A cluster whose Kueue serves no visibility API: the queue lists its Workloads."""

    cluster = None

    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def server_get(self, path: str) -> str:
        raise KubeError("the server could not find the requested resource")

    def list(self, kind: str, namespace: str) -> dict:
        assert kind == "Workload"
        return {"items": self.items}


def test_where_kueues_workloads_were_listed_their_conditions_say_why(vision_lab, cluster):
    workload = make_workload(vision_lab, "researcher", name="wide", kind="batch", port=None,
                             gpu_count=4, state=Workload.State.QUEUED)
    listed = {"metadata": {"name": f"job-{workload.object_name}-1a2b3",
                           "creationTimestamp": "2026-11-29T05:40:00Z",
                           "ownerReferences": [{"kind": "Job", "name": workload.object_name}]},
              "spec": {"queueName": "gpu-portal", "priority": 100},
              "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                                         "reason": "Pending", "message": SHORT}]}}
    place = queue_places([workload], WithoutVisibility([listed]), remembered=False)[workload.pk]
    assert (place.position, place.length) == (1, 1)
    assert place.reason.startswith("Waiting for 2 more a100")
    assert place.kueue_message == SHORT
