"""Reads of the budgets domain: a tenant's consumption in the current period and its budget's
standing (used, remaining, forecast, reset), its top users, the burn-down series.

Consumption is weighted GPU-hours: each workload's run (started_at .. finished_at, or now while
it runs) clipped to [period start, now], × its GPUs (gpu_count × nodes) × the part of a GPU
a unit of its type is (a shared type's gpu_fraction) × the weight of its GPU type. One SQL aggregate, grouped by GPU type and GPU total (PostgreSQL and SQLite alike); the
weights apply to its few groups.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db.models import (
    Count,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone

from identity.models import User
from tenants.models import Tenant
from workloads.models import Workload
from workloads.querysets import GPU_TOTAL, run_within
from workloads.selectors import runs_between

from .models import Budget
from .periods import period_bounds, period_label

TOP_USERS = 5


def _runs(tenant: Tenant | int, start: dt.datetime, now: dt.datetime) -> QuerySet[Workload]:
    """The tenant's workloads that ran in [start, now] (deleted ones too: they were used)."""
    return runs_between(start, now).filter(tenant=tenant)


# a unit of a shared GPU type is a part of a GPU (the type's gpu_fraction): GPU-hours count
# units × that part, so a quarter of a T4 for an hour costs a quarter of a GPU-hour
SHARE = ("gpu_type__fraction_numerator", "gpu_type__fraction_denominator")


def _share(group: dict[str, Any]) -> float:
    numerator, denominator = (group[field] for field in SHARE)
    return numerator / denominator if numerator else 1.0


@dataclasses.dataclass(frozen=True)
class Consumption:
    used: float  # weighted GPU-hours in the period so far
    rate: float  # weighted GPUs running now: GPU-hours per hour
    user_used: float | None = None  # the one user's part, when asked


def consumption(tenant: Tenant | int, *, weights: dict[str, Any], start: dt.datetime,
                now: dt.datetime, user: Any = None) -> Consumption:
    """The tenant's weighted GPU-hours in [start, now] (and `user`'s part of them): one
    aggregate query."""
    run = run_within(start, now)
    sums: dict[str, Any] = {"run": Sum(run),
                            # the burn rate: what holds GPUs now (a preempted run waiting in
                            # the queue again has no finish yet, but holds none)
                            "running": Count("id", filter=Q(finished_at__isnull=True,
                                                            state=Workload.State.RUNNING))}
    if user is not None:
        sums["user_run"] = Sum(run, filter=Q(owner=user))
    groups = (_runs(tenant, start, now).values("gpu_type__slug", *SHARE, gpus=GPU_TOTAL)
              .annotate(**sums))
    used = rate = user_used = 0.0
    for group in groups:
        factor = group["gpus"] * _share(group) * float(weights.get(group["gpu_type__slug"], 1.0))
        used += _hours(group["run"]) * factor
        rate += group["running"] * factor
        if user is not None:
            user_used += _hours(group["user_run"]) * factor
    return Consumption(used=used, rate=rate, user_used=user_used if user is not None else None)


def _hours(duration: dt.timedelta | None) -> float:
    return duration.total_seconds() / 3600 if duration else 0.0


def consumption_by_user(tenant: Tenant | int, *, weights: dict[str, Any], start: dt.datetime,
                        now: dt.datetime) -> list[tuple[str, float]]:
    """(Keystone user id, weighted GPU-hours) of everyone who used GPUs in [start, now], most
    first. (A user's `username` is their Keystone user id: identity/models.py.)"""
    groups = (_runs(tenant, start, now)
              .values("owner__username", "gpu_type__slug", *SHARE, gpus=GPU_TOTAL)
              .annotate(run=Sum(run_within(start, now))))
    by_user: dict[str, float] = defaultdict(float)
    for group in groups:
        by_user[group["owner__username"]] += (_hours(group["run"]) * group["gpus"] * _share(group)
                                              * float(weights.get(group["gpu_type__slug"], 1.0)))
    return sorted(by_user.items(), key=lambda item: (-item[1], item[0]))


@dataclasses.dataclass(frozen=True)
class BudgetStatus:
    """A budget's standing now (or a tenant without one: `budget` None, used still counted)."""

    tenant: Tenant
    budget: Budget | None
    period: str
    period_start: dt.datetime
    resets_at: dt.datetime
    now: dt.datetime
    used: float
    rate: float
    user_used: float | None = None

    @property
    def gpu_hours(self) -> float | None:
        return float(self.budget.gpu_hours) if self.budget is not None else None

    @property
    def remaining(self) -> float | None:
        return None if self.gpu_hours is None else max(self.gpu_hours - self.used, 0.0)

    @property
    def percent(self) -> float | None:
        if self.gpu_hours is None:
            return None
        if self.gpu_hours == 0:
            return 100.0
        return 100.0 * self.used / self.gpu_hours

    @property
    def exhausted(self) -> bool:
        return self.gpu_hours is not None and self.used >= self.gpu_hours

    @property
    def forecast_exhausted_at(self) -> dt.datetime | None:
        """When `used` reaches the budget at the current burn rate: None when nothing runs,
        when it is used up already, or when the period resets first."""
        if self.gpu_hours is None or self.exhausted or self.rate <= 0:
            return None
        hours = (self.gpu_hours - self.used) / self.rate
        # compared before it becomes a time: a large budget at a small rate is centuries away,
        # beyond what a datetime holds, and "not before the reset" all the same
        if hours >= (self.resets_at - self.now).total_seconds() / 3600:
            return None
        return self.now + dt.timedelta(hours=hours)

    @property
    def label(self) -> str:
        """The period in words: "November 2026"."""
        return period_label(self.period, self.period_start)

    def user_cap(self, user_id: str) -> float | None:
        """The cap of the user with this Keystone user id (the caps' key), if they have one."""
        if self.budget is None:
            return None
        cap = (self.budget.user_caps or {}).get(user_id)
        return None if cap is None else float(cap)


def budget_of(tenant: Tenant) -> Budget | None:
    # by its unique tenant, without the model's ordering (a join to the tenant's name)
    return Budget.objects.filter(tenant=tenant).order_by().first()


def budget_status(tenant: Tenant, *, budget: Budget | None = None, user: Any = None,
                  now: dt.datetime | None = None, lookup: bool = True) -> BudgetStatus:
    """The tenant's budget now (`budget` given, or looked up unless `lookup` is False); a
    tenant without one is counted by the month."""
    now = now or timezone.now()
    if budget is None and lookup:
        budget = budget_of(tenant)
    period = budget.period if budget is not None else Budget.Period.MONTH
    start, resets_at = period_bounds(period, now)
    weights = budget.weights if budget is not None else {}
    settled = _settled(budget, start, now)
    if settled is None:
        counted = consumption(tenant, weights=weights, start=start, now=now, user=user)
        used, user_used = counted.used, counted.user_used
    else:  # what the check settled, and what ran since
        counted = consumption(tenant, weights=weights, start=settled, now=now, user=user)
        assert budget is not None
        used = budget.settled_used + counted.used
        user_used = None if user is None else (
            float((budget.settled_by_user or {}).get(user.username, 0.0))
            + (counted.user_used or 0.0))
    return BudgetStatus(tenant=tenant, budget=budget, period=period, period_start=start,
                        resets_at=resets_at, now=now, used=used, rate=counted.rate,
                        user_used=user_used)


def _settled(budget: Budget | None, start: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """Until when the budget's settled GPU-hours of this period hold, if they do."""
    if budget is None or budget.settled_until is None or budget.settled_start != start:
        return None
    return budget.settled_until if start <= budget.settled_until <= now else None


def budget_settlement(budget: Budget, *, until: dt.datetime) -> dict[str, Any]:
    """The weighted GPU-hours of the budget's period until `until`, in all and by user id:
    what the periodic check stores (services.budget_settle). One aggregate."""
    start, _ = period_bounds(budget.period, until)
    by_user = consumption_by_user(budget.tenant, weights=budget.weights or {}, start=start,
                                  now=until) if until > start else []
    return {"settled_start": start, "settled_until": max(until, start),
            "settled_used": sum(hours for _, hours in by_user),
            "settled_by_user": {name: hours for name, hours in by_user}}


def top_users(status: BudgetStatus, limit: int = TOP_USERS) -> list[dict[str, Any]]:
    rows = consumption_by_user(status.tenant,
                               weights=status.budget.weights if status.budget else {},
                               start=status.period_start, now=status.now)
    users = {user.username: user for user in User.objects.filter(
        username__in=[user_id for user_id, _ in rows[:limit]])}
    return [{"user_id": user_id, "user": users[user_id].label if user_id in users else user_id,
             "domain": users[user_id].domain_name if user_id in users else "",
             "gpu_hours": round(hours, 4), "cap": status.user_cap(user_id)}
            for user_id, hours in rows[:limit]]


def budget_statuses(budgets: Iterable[Budget], *, now: dt.datetime | None = None
                    ) -> list[BudgetStatus]:
    """Every budget's standing (the admin's overview, the periodic check): one aggregate each."""
    now = now or timezone.now()
    return [budget_status(budget.tenant, budget=budget, now=now) for budget in budgets]


def burn_down(status: BudgetStatus) -> dict[str, Any]:
    """The chart's series: per day of the period, cumulative weighted GPU-hours at that day's
    end (till now), the budget line, and the forecast at the current rate from now to the
    reset (capped at the budget). One aggregate: a sum per elapsed day. Times in Unix seconds
    (uPlot's x)."""
    ends: list[dt.datetime] = []
    day = timezone.localtime(status.period_start)
    while day < status.resets_at:
        day = (day + dt.timedelta(days=1, hours=2)).replace(hour=0, minute=0, second=0,
                                                            microsecond=0)
        ends.append(min(day, status.resets_at))
    elapsed = [min(end, status.now) for end in ends if end - dt.timedelta(days=1) < status.now]
    weights = status.budget.weights if status.budget is not None else {}
    sums = {f"d{i}": Sum(run_within(status.period_start, upto), filter=Q(started_at__lt=upto))
            for i, upto in enumerate(elapsed)}
    cumulative = [0.0] * len(elapsed)
    if sums:
        groups = (_runs(status.tenant, status.period_start, status.now)
                  .values("gpu_type__slug", gpus=GPU_TOTAL).annotate(**sums))
        for group in groups:
            factor = group["gpus"] * float(weights.get(group["gpu_type__slug"], 1.0))
            for i in range(len(elapsed)):
                cumulative[i] += _hours(group[f"d{i}"]) * factor
    used: list[float | None] = [round(v, 3) for v in cumulative]
    used += [None] * (len(ends) - len(used))
    forecast: list[float | None] = []
    for end in ends:
        if end < status.now:
            forecast.append(None)
            continue
        projected = status.used + status.rate * (end - status.now).total_seconds() / 3600
        if status.gpu_hours is not None:
            projected = min(projected, max(status.gpu_hours, status.used))
        forecast.append(round(projected, 3))
    return {"tenant": status.tenant.name, "x": [end.timestamp() for end in ends], "used": used, "forecast": forecast,
            "budget": status.gpu_hours, "resets_at": status.resets_at.isoformat(),
            "period_start": status.period_start.isoformat()}


def gpu_hours_text(value: float | Decimal | None) -> str:
    """"120", "120.5", "0.25": a figure of GPU-hours as people write it."""
    if value is None:
        return "no limit"
    return f"{Decimal(str(round(float(value), 2))).normalize():f}"
