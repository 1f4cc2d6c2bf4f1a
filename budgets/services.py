"""Writes of the budgets domain: set and delete a budget (audited), and the periodic check of
each budget: thresholds notified once per period, the Kueue queue held while a hard budget is
used up (lifted at the reset), and "stop at exhaustion" (warn, then stop after the grace)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from audit.services import Actor, audit_record
from core.tasks import send_on_commit
from identity.models import User
from notifications.models import Kind
from notifications.services import notify
from tenants.figures import AdjustmentLine
from tenants.models import QuotaAdjustment, Tenant
from tenants.selectors import quota_figures, tenants_adjusted_by
from tenants.services import quota_adjustments_set
from workloads.journal import notify_owner, workload_event
from workloads.models import Workload
from workloads.services import workload_stop

from .admission import exhausted_text
from .models import Budget, BudgetThresholdCrossed
from .selectors import BudgetStatus, budget_settlement, budget_status, gpu_hours_text

HOLD_PREFIX = "GPU-hour budget: "  # how the reason of its queue hold begins
HOLD = QuotaAdjustment.Source.BUDGET_HOLD  # the quota adjustments this app writes
# the periodic check settles the period's GPU-hours until this long ago: the tracker writes a
# run's start and end a moment after they happen, and what it writes later than this is not
# in a settled sum (selectors.budget_status adds what ran since)
SETTLE_MARGIN = dt.timedelta(minutes=5)
UNSETTLED: dict[str, Any] = {"settled_start": None, "settled_until": None, "settled_used": 0.0,
             "settled_by_user": {}}


def budget_snapshot(budget: Budget | None) -> dict[str, Any] | None:
    """A budget as plain data: what the audit trail shows."""
    if budget is None:
        return None
    return {"period": budget.period,
            "gpu_hours": f"{Decimal(str(budget.gpu_hours)).normalize():f}",
            "weights": dict(budget.weights or {}), "hard": budget.hard,
            "warn_at": list(budget.warn_at or []),
            "stop_at_exhaustion": budget.stop_at_exhaustion,
            "user_caps": dict(budget.user_caps or {})}


def _enqueue_check(budget_id: int) -> None:
    send_on_commit("budgets.tasks.budget_check_task", budget_id)


def budget_set(*, tenant: Tenant, acting_user: Actor, fields: dict[str, Any]) -> Budget:
    """Create or replace the tenant's budget with validated fields (validation.budget_clean).
    Its effect on launches is immediate (admission reads it); its check (thresholds, the
    queue hold) runs after the commit."""
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)  # serialise with admission
        budget = Budget.objects.filter(tenant=tenant).first()
        before = budget_snapshot(budget)
        if budget is None:
            budget = Budget(tenant=tenant)
        for field, value in {**fields, **UNSETTLED}.items():  # weights or period may change
            setattr(budget, field, value)
        budget.save()
        budget.refresh_from_db()
        after = budget_snapshot(budget)
        if after != before:
            audit_record(actor=acting_user, action="budget.set", tenant=tenant,
                         target=tenant.namespace, before=before, after=after)
        _enqueue_check(budget.pk)
    return budget


def budget_delete(*, tenant: Tenant, acting_user: Actor) -> bool:
    """Remove the tenant's budget (unlimited again) and lift a hold it set. False: none."""
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)
        budget = Budget.objects.filter(tenant=tenant).first()
        if budget is None:
            return False
        before = budget_snapshot(budget)
        budget.delete()
        audit_record(actor=acting_user, action="budget.delete", tenant=tenant,
                     target=tenant.namespace, before=before, after=None)
        _hold_lift(tenant)
    return True


# --- the periodic check ------------------------------------------------------------------------

@dataclasses.dataclass
class CheckResult:
    notified: list[int] = dataclasses.field(default_factory=list)  # thresholds told now
    held: bool | None = None  # the queue hold set (True) or lifted (False) now
    stopped: list[int] = dataclasses.field(default_factory=list)


def _hold_lift(tenant: Tenant) -> bool:
    """Remove the budget's hold of the tenant's queue, if it has one (in force or not)."""
    return quota_adjustments_set(tenant=tenant, source=HOLD, adjustments=[],
                                 reason="the GPU-hour budget is no longer used up")


def _recipients(tenant: Tenant, status: BudgetStatus) -> list[User]:
    """Who hears of the budget: everyone whose workloads ran in the tenant this period."""
    owners = (Workload.objects.filter(tenant=tenant, started_at__isnull=False,
                                      started_at__lt=status.now)
              .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=status.period_start))
              .values("owner"))
    return list(User.objects.filter(pk__in=owners))


def _link() -> str:
    return reverse("budgets:mine")


def _notify_threshold(budget: Budget, status: BudgetStatus, threshold: int) -> None:
    tenant = status.tenant
    key = f"budget:{budget.pk}:{status.period_start:%Y-%m-%d}:{threshold}"
    if threshold >= 100:
        title = f"{tenant.name}: GPU-hour budget used up"
        text = exhausted_text(status)
        if budget.stop_at_exhaustion:
            text += (f" Its running workloads are stopped in "
                     f"{settings.PORTAL_BUDGET_STOP_GRACE_MINUTES} minutes.")
        kind = Kind.BUDGET_EXHAUSTED
    else:
        title = f"{tenant.name}: {threshold} % of the GPU-hour budget used"
        text = (f"{tenant.name} has used {status.used:.1f} of its "
                f"{gpu_hours_text(status.gpu_hours)} GPU-hours for {status.label} "
                f"({status.percent or 0:.0f} %); it starts again on "
                f"{timezone.localtime(status.resets_at):%Y-%m-%d}.")
        kind = Kind.BUDGET_THRESHOLD
    notify(kind=kind, users=_recipients(tenant, status), tenant=tenant, title=title, text=text,
           key=key, link=_link())


def _thresholds(budget: Budget, status: BudgetStatus, result: CheckResult) -> None:
    """Each threshold crossed in this period: one row (unique), told once. 100 % is always
    one: exhaustion is what a hard budget and "stop at exhaustion" act on."""
    percent = status.percent or 0.0
    for threshold in sorted(set(budget.warn_at or []) | {100}):
        if percent < threshold:
            break
        try:
            with transaction.atomic():
                _, created = BudgetThresholdCrossed.objects.get_or_create(
                    budget=budget, period_start=status.period_start, threshold=threshold,
                    defaults={"crossed_at": status.now})
                if created:
                    _notify_threshold(budget, status, threshold)
        except IntegrityError:
            continue  # a concurrent check recorded (and told) it
        if created:
            result.notified.append(threshold)


def _hold(budget: Budget, status: BudgetStatus, result: CheckResult) -> None:
    tenant = status.tenant
    if budget.hard and status.exhausted:
        # held until the period's reset at the latest (the hold ends by itself then, should no
        # check come); once held, the figures that grow in its reason do not rewrite it
        reason = HOLD_PREFIX + exhausted_text(status).split(";")[0]
        hold = AdjustmentLine(source=HOLD, kind=QuotaAdjustment.Kind.HOLD,
                              ref=f"budget:{budget.pk}", reason=reason,
                              starts_at=status.period_start, ends_at=status.resets_at)
        if not quota_figures(tenant, now=status.now).held_by(HOLD) and \
                quota_adjustments_set(tenant=tenant, source=HOLD, adjustments=[hold],
                                      reason=reason):
            result.held = True
    elif _hold_lift(tenant):
        result.held = False


def _stop_at_exhaustion(budget: Budget, status: BudgetStatus, result: CheckResult) -> None:
    """Warn the running workloads (once), then stop them after the grace."""
    if not (budget.stop_at_exhaustion and status.exhausted):
        return
    crossed = BudgetThresholdCrossed.objects.filter(
        budget=budget, period_start=status.period_start, threshold=100).first()
    if crossed is None:
        return
    stop_at = crossed.crossed_at + dt.timedelta(minutes=settings.PORTAL_BUDGET_STOP_GRACE_MINUTES)
    live = Workload.objects.filter(tenant=status.tenant, state__in=Workload.ACTIVE_STATES,
                                   deleted_at__isnull=True).select_related("owner")
    reason = (f"Stopped: {status.tenant.name}'s GPU-hour budget for {status.label} is used up "
              f"({status.used:.1f} of {gpu_hours_text(status.gpu_hours)} GPU-hours; the admins "
              "chose to stop running workloads at exhaustion).")
    for workload in live:
        if status.now < stop_at:
            key = f"budget:{budget.pk}:{status.period_start:%Y-%m-%d}:stop:{workload.pk}"
            warning = (f"{workload.name} will be stopped at "
                       f"{timezone.localtime(stop_at):%Y-%m-%d %H:%M}: "
                       f"{exhausted_text(status)}")
            with transaction.atomic():
                if notify_owner(workload, kind=Kind.BUDGET_EXHAUSTED,
                                title=f"{workload.name} will be stopped", text=warning,
                                key=key):
                    workload_event(workload=workload, reason="BudgetExhausted",
                                   message=warning, type="Warning")
        else:
            workload_stop(workload=workload, user=None, reason=reason)
            result.stopped.append(workload.pk)


def budget_settle(*, budget: Budget, now: dt.datetime) -> None:
    """Store the period's GPU-hours until SETTLE_MARGIN ago on the budget (derived data, not
    audited): a launch's check then reads only the runs since. Written only where the budget
    was not changed meanwhile (its settlement cleared by budget_set)."""
    settlement = budget_settlement(budget, until=now - SETTLE_MARGIN)
    Budget.objects.filter(pk=budget.pk, updated_at=budget.updated_at).update(**settlement)
    for field, value in settlement.items():
        setattr(budget, field, value)


def budget_check(*, budget_id: int, now: dt.datetime | None = None) -> CheckResult:
    """One budget's periodic check (idempotent: run it as often as you like)."""
    result = CheckResult()
    budget = Budget.objects.select_related("tenant").filter(pk=budget_id).first()
    if budget is None:
        return result
    now = now or timezone.now()
    budget_settle(budget=budget, now=now)
    status = budget_status(budget.tenant, budget=budget, now=now)
    _thresholds(budget, status, result)
    _hold(budget, status, result)
    _stop_at_exhaustion(budget, status, result)
    return result


def budgets_check_all(*, now: dt.datetime | None = None) -> dict[int, CheckResult]:
    """Every budget's check, and the holds of budgets that are gone lifted."""
    results = {pk: budget_check(budget_id=pk, now=now)
               for pk in Budget.objects.values_list("pk", flat=True)}
    for tenant in tenants_adjusted_by(HOLD).filter(budget__isnull=True):
        _hold_lift(tenant)
    return results
