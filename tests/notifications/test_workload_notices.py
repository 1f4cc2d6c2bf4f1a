"""What a workload's owner hears of it (workloads/journal.py's state_notice and notify_owner):
started, finished, failed and stopped-by-someone-else once per event, a retried claim telling
nothing twice; the maximum runtime near, once per limit, with the clock moved (time-machine)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.utils import timezone

from catalogue.models import Template
from identity.models import User
from notifications.models import Notification
from tenants.services import tenant_ensure
from workloads.models import Workload
from workloads.services import workload_stop
from workloads.tasks import workloads_enforce_runtime
from workloads.transitions import workload_transition

pytestmark = pytest.mark.django_db

S = Workload.State


def row(gpu_types, state: str = S.PENDING, **fields) -> Workload:
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Vision Lab {uuid.uuid4().hex[:6]}")
    owner = User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")
    return Workload.objects.create(
        tenant=tenant, owner=owner, name="train", object_name="wl-train",
        template=Template.objects.get(slug="custom"), kind="batch", gpu_type=gpu_types["a100"],
        gpu_count=2, image="busybox:1.36", cpu=1, memory_gb=1, state=state, **fields)


def told(workload: Workload) -> list[tuple[str, str]]:
    return list(Notification.objects.filter(workload_id=workload.pk).order_by("id")
                .values_list("kind", "title"))


def test_a_run_is_told_started_then_finished_once_each(gpu_types):
    workload = row(gpu_types)
    assert workload_transition(workload=workload, allowed_from=[S.PENDING], to=S.RUNNING)
    # the same claim again (a retried task, a second tracker): no move, nothing told
    assert not workload_transition(workload=workload, allowed_from=[S.PENDING], to=S.RUNNING)
    assert workload_transition(workload=workload, allowed_from=[S.RUNNING], to=S.RUNNING,
                               reason="still running")
    assert workload_transition(workload=workload, allowed_from=[S.RUNNING], to=S.SUCCEEDED)
    assert told(workload) == [("started", f"train (#{workload.pk}) is running"),
                              ("finished", f"train (#{workload.pk}) finished")]
    started = Notification.objects.get(workload_id=workload.pk, kind="started")
    assert started.user == workload.owner and started.tenant == workload.tenant
    assert started.link == f"/workloads/{workload.pk}/" and "2× a100" in started.text
    assert started.read_at is None


def test_a_failure_is_told_with_its_reason(gpu_types):
    workload = row(gpu_types, state=S.RUNNING, started_at=timezone.now())
    workload_transition(workload=workload, allowed_from=[S.RUNNING], to=S.FAILED,
                        reason="Job has reached the specified backoff limit")
    (kind, _), = told(workload)
    assert kind == "failed"
    assert Notification.objects.get(workload_id=workload.pk).text.endswith(
        "failed: Job has reached the specified backoff limit")


def test_a_pod_replaced_is_not_a_new_start_but_a_requeued_run_is(gpu_types):
    workload = row(gpu_types)
    workload_transition(workload=workload, allowed_from=[S.PENDING], to=S.RUNNING)
    workload_transition(workload=workload, allowed_from=[S.RUNNING], to=S.PENDING)
    workload_transition(workload=workload, allowed_from=[S.PENDING], to=S.RUNNING)
    assert [kind for kind, _ in told(workload)] == ["started"]
    # preempted back to the queue, then admitted again: "started again"
    workload_transition(workload=workload, allowed_from=[S.RUNNING], to=S.QUEUED)
    workload_transition(workload=workload, allowed_from=[S.QUEUED], to=S.RUNNING)
    assert told(workload)[-1] == ("started", f"train (#{workload.pk}) started again")


def test_a_stop_is_told_when_someone_else_made_it(gpu_types):
    mine = row(gpu_types, state=S.RUNNING)
    workload_stop(workload=mine, user=mine.owner)
    assert told(mine) == []  # the owner stopped it: they know
    theirs = row(gpu_types, state=S.RUNNING)
    workload_stop(workload=theirs, user=None, reason="Reached its maximum runtime of 60 minutes.")
    workload_stop(workload=theirs, user=None, reason="again")  # no longer stoppable: no notice
    assert told(theirs) == [("stopped", f"train (#{theirs.pk}) was stopped")]
    assert "maximum runtime" in Notification.objects.get(workload_id=theirs.pk).text


def test_the_maximum_runtime_near_is_told_once_30_minutes_before(gpu_types):
    start = dt.datetime(2026, 11, 27, 9, 0, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False):
        workload = row(gpu_types, state=S.RUNNING, started_at=start, max_runtime_minutes=120,
                       expires_at=start + dt.timedelta(minutes=120))
        short = row(gpu_types, state=S.RUNNING, started_at=start, max_runtime_minutes=20,
                    expires_at=start + dt.timedelta(minutes=20))
        workloads_enforce_runtime()
        assert told(workload) == []
    with time_machine.travel(start + dt.timedelta(minutes=89), tick=False):
        workloads_enforce_runtime()
        assert told(workload) == []
    with time_machine.travel(start + dt.timedelta(minutes=91), tick=False):
        workloads_enforce_runtime()
        workloads_enforce_runtime()  # the beat's next round: told already
    assert told(workload) == [("runtime_near", f"train (#{workload.pk}) stops in 29 min")]
    # a run no longer than the notice's lead is not told ahead (its owner chose that end);
    # it hears of the stop itself
    assert [kind for kind, _ in told(short)] == ["stopped"]


def test_only_recipients_with_an_outside_channel_get_a_dispatch(
        gpu_types, settings, django_capture_on_commit_callbacks):
    """A notice to an owner with no e-mail and no webhook is written handed out (no task for
    the broker, nothing for the beat's sweep); one with an address, where e-mail is on, waits
    for its dispatch task."""
    from notifications.services import notify

    settings.EMAIL_HOST = "mail.example.org"
    quiet, mailed = row(gpu_types), row(gpu_types)
    mailed.owner.email = "owner@example.org"
    mailed.owner.save(update_fields=["email"])
    for workload, expected_tasks in ((quiet, 0), (mailed, 1)):
        with django_capture_on_commit_callbacks() as sent:
            notify(kind="finished", users=[workload.owner], tenant=workload.tenant,
                   title="t", text="x", key=f"k:{workload.pk}")
        assert len(sent) == expected_tasks
    assert Notification.objects.get(key=f"k:{quiet.pk}").dispatched_at is not None
    assert Notification.objects.get(key=f"k:{mailed.pk}").dispatched_at is None
