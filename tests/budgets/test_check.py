"""The periodic check: each threshold notifies exactly once per period (a retried or concurrent
check too), a hard budget used up holds the tenant's queue and the reset lifts it, and "stop at
exhaustion" warns the running workloads, then stops them through the stop path."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection
from django.test import TestCase

from audit.models import AuditRecord
from budgets.models import BudgetThresholdCrossed
from budgets.services import HOLD_PREFIX, budget_check, budgets_check_all
from notifications.models import Kind, Notification
from tenants.selectors import quota_figures
from tests.budgets.conftest import NOW, budget, run
from workloads.models import Workload, WorkloadEvent

pytestmark = pytest.mark.django_db


def told(kind: str | None = None) -> list[tuple[str, str]]:
    rows = Notification.objects.order_by("id")
    if kind:
        rows = rows.filter(kind=kind)
    return [(n.user.username, n.kind) for n in rows]


@pytest.fixture
def vision(tenants, users, clock):
    """ann ran 2 a100 for 5 hours this month and runs one more now; bob used 1 hour."""
    tenant = tenants["vision-lab"]
    run(tenant, users["ann"], start=NOW - dt.timedelta(hours=6), end=NOW - dt.timedelta(hours=1),
        gpus=2)
    run(tenant, users["ann"], start=NOW - dt.timedelta(hours=1), name="notebook")
    run(tenant, users["bob"], start=NOW - dt.timedelta(days=3),
        end=NOW - dt.timedelta(days=3, hours=-1))
    return tenant  # 10 + 1 + 1 = 12 GPU-hours


def test_each_threshold_notifies_once_per_period(vision):
    row = budget(vision, 20, warn_at=[50, 80, 100])
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).notified == [50]  # 60 %
        assert budget_check(budget_id=row.pk).notified == []  # retried: nothing new
    assert told() == [("ann", Kind.BUDGET_THRESHOLD), ("bob", Kind.BUDGET_THRESHOLD)]
    assert "12.0 of its 20 GPU-hours for November 2026" in Notification.objects.first().text
    row.gpu_hours = 12
    row.save()
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).notified == [80, 100]
        budgets_check_all()
    assert told(Kind.BUDGET_EXHAUSTED) == [("ann", Kind.BUDGET_EXHAUSTED),
                                           ("bob", Kind.BUDGET_EXHAUSTED)]
    assert len(told()) == 6
    # the next period starts from zero: its thresholds are its own
    with TestCase.captureOnCommitCallbacks(execute=False):
        result = budget_check(budget_id=row.pk, now=dt.datetime(2026, 12, 1, 0, 30, tzinfo=dt.UTC))
    assert result.notified == []  # half an hour of one a100: 0.5 of 12
    assert sorted(BudgetThresholdCrossed.objects.values_list("threshold", flat=True)) == \
        [50, 80, 100]


@pytest.mark.django_db(transaction=True)
def test_concurrent_checks_notify_once(tenants, users, eager_celery):
    tenant = tenants["vision-lab"]
    now = dt.datetime.now(dt.UTC)
    run(tenant, users["ann"], start=now - dt.timedelta(hours=5), end=now, gpus=2)
    row = budget(tenant, 10, warn_at=[25, 50, 75, 100])
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def check() -> None:
        try:
            barrier.wait()
            budget_check(budget_id=row.pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(Notification.objects.values_list("key", flat=True)) == sorted(
        f"budget:{row.pk}:{now:%Y-%m}-01:{t}" for t in (25, 50, 75, 100))
    assert BudgetThresholdCrossed.objects.count() == 4


def test_a_hard_budget_used_up_holds_the_queue_until_the_reset(vision, clock):
    row = budget(vision, 12, hard=True)
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).held is True
        assert budget_check(budget_id=row.pk).held is None  # held already: nothing to do
    figures = quota_figures(vision)
    assert figures.held and figures.held_by("budget_hold")
    reason = figures.held_reason
    assert reason.startswith(HOLD_PREFIX) and "November 2026" in reason
    # held until the reset at the latest, should no check come then
    assert figures.holds[0].ends_at == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert AuditRecord.objects.filter(action="quota.adjust").count() == 1
    clock.move_to(dt.datetime(2026, 12, 1, 0, 1, tzinfo=dt.UTC))
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).held is False
    assert not quota_figures(vision).held
    audit = AuditRecord.objects.filter(action="quota.adjust").order_by("id").last()
    assert (audit.after["source"], audit.after["adjustments"]) == ("budget_hold", [])


def test_a_soft_budget_used_up_holds_nothing(vision):
    row = budget(vision, 12, hard=False)
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).held is None
    assert not quota_figures(vision).held


def test_stop_at_exhaustion_warns_then_stops_through_the_stop_path(vision, clock, settings):
    settings.PORTAL_BUDGET_STOP_GRACE_MINUTES = 15
    row = budget(vision, 12, stop_at_exhaustion=True)
    notebook = Workload.objects.get(name="notebook")
    with TestCase.captureOnCommitCallbacks(execute=False):
        result = budget_check(budget_id=row.pk)
        assert result.notified == [50, 80, 100] and result.stopped == []
        budget_check(budget_id=row.pk)  # retried: warned once
    warnings = Notification.objects.filter(workload_id=notebook.pk)
    assert [(n.user.username, n.kind) for n in warnings] == [("ann", Kind.BUDGET_EXHAUSTED)]
    assert "will be stopped at 2026-11-20 12:15" in warnings[0].text
    assert WorkloadEvent.objects.filter(workload=notebook, reason="BudgetExhausted").count() == 1
    notebook.refresh_from_db()
    assert notebook.state == Workload.State.RUNNING
    clock.move_to(NOW + dt.timedelta(minutes=16))
    with TestCase.captureOnCommitCallbacks(execute=False) as enqueued:
        assert budget_check(budget_id=row.pk).stopped == [notebook.pk]
    notebook.refresh_from_db()
    assert notebook.state == Workload.State.STOPPING
    assert "GPU-hour budget for November 2026 is used up" in notebook.reason
    assert enqueued  # the stop task, after the commit
    assert AuditRecord.objects.filter(action="workload.stop", target=notebook.object_name).exists()


def test_without_stop_at_exhaustion_running_workloads_run_on(vision, clock):
    row = budget(vision, 12, hard=True)
    clock.move_to(NOW + dt.timedelta(hours=2))
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert budget_check(budget_id=row.pk).stopped == []
    assert Workload.objects.get(name="notebook").state == Workload.State.RUNNING
