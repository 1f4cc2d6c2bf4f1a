"""The "queued" notice (workloads/tasks.py): a launch whose objects are made in its project's
Kueue queue is not told at once that it waits; its owner hears it PORTAL_QUEUED_NOTICE_SECONDS
later if it still does, once per try. A launch admitted meanwhile is told only "started". In
kubesim, queueing insisted on (PORTAL_QUEUEING "kueue"), the notice task sent with its delay
noted instead of to the broker."""

from __future__ import annotations

from typing import Any

import pytest

from catalogue.models import Template
from notifications.models import Notification
from tests.support.admission import admitted
from workloads.models import Workload
from workloads.tasks import workload_create_task, workload_queued_notice_task
from workloads.transitions import workload_transition

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State


@pytest.fixture
def sent(settings, monkeypatch) -> list[tuple[tuple[Any, ...], float]]:
    """The notice tasks the create task sent: (arguments, countdown) each."""
    settings.PORTAL_QUEUED_NOTICE_SECONDS = 7
    noted: list[tuple[tuple[Any, ...], float]] = []
    monkeypatch.setattr(workload_queued_notice_task, "apply_async",
                        lambda args, *, countdown: noted.append((args, countdown)))
    return noted


def queued_launch(tenants, owner, gpu_types, settings) -> Workload:
    tenant = tenants()  # provisioned as kubesim serves it: without Kueue's queues
    settings.PORTAL_QUEUEING = "kueue"  # its launches made as queued ones (their labels)
    workload = admitted(tenant, owner, Template.objects.get(slug="jupyter"), gpu_types["a100"])
    workload_create_task(workload.pk)
    workload.refresh_from_db()
    assert workload.state == S.QUEUED, workload.reason
    return workload


def queued_notices(workload: Workload) -> list[Notification]:
    return list(Notification.objects.filter(workload_id=workload.pk, kind="queued"))


def test_a_queued_launch_is_told_later_not_by_its_create_task(tenants, owner, gpu_types,
                                                             settings, sent):
    workload = queued_launch(tenants, owner, gpu_types, settings)

    # the create task told no one; it left the notice for later, for this try
    assert queued_notices(workload) == []
    assert sent == [((workload.pk, 1), 7)]

    # still queued when it comes: told once, with what it waits for
    workload_queued_notice_task(*sent[0][0])
    workload_queued_notice_task(*sent[0][0])  # a redelivered message
    notice, = queued_notices(workload)
    assert notice.user_id == owner.pk
    assert notice.title == f"{workload.name} (#{workload.pk}) is queued"
    assert "waits for 1× a100: queued" in notice.text


def test_a_launch_admitted_before_the_notice_is_not_told_it_waits(tenants, owner, gpu_types,
                                                                  settings, sent):
    workload = queued_launch(tenants, owner, gpu_types, settings)
    assert workload_transition(workload_id=workload.pk, allowed_from=(S.QUEUED,),
                               to=S.PENDING, reason="admitted")

    workload_queued_notice_task(*sent[0][0])

    assert queued_notices(workload) == []


def test_a_notice_of_an_earlier_try_is_not_sent(tenants, owner, gpu_types, settings, sent):
    """A launch tried again (its create task claimed it once more) waits on that try's notice;
    the first try's says nothing, and neither does one of a workload removed since."""
    workload = queued_launch(tenants, owner, gpu_types, settings)
    Workload.objects.filter(pk=workload.pk).update(launch_attempts=2)

    workload_queued_notice_task(workload.pk, 1)
    workload_queued_notice_task(workload.pk + 1000, 1)

    assert queued_notices(workload) == []
