"""Reads of billing: the price sheets, a month's statement lines (frozen once the month is
closed, worked out live before) and the monthly report over them, narrowed to what the caller
may see: admins every project, a department's admins its projects, a manager their project.

What is charged is what was held: each workload's run (started_at .. finished_at, or now
while it runs) clipped to the month, × its GPUs (gpu_count × nodes) × the part of a GPU a
unit of its type is; its CPU cores × nodes the same; each volume's size over the time it was
bound (storage's VolumeSize rows). The figures are exact (costing.py); prices apply from
midnight of their sheet's day in the portal's time zone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from allocations.models import ProjectRecord
from identity.identity import Identity
from storage.models import VolumeSize
from storage.selectors import volume_gib_days_exact
from tenants.models import Tenant
from tenants.querysets import department_project
from tenants.selectors import tenants_administered, tenants_reachable
from workloads.querysets import CPU_TOTAL, GPU_TOTAL, run_within
from workloads.selectors import runs_between

from .costing import (
    CPU,
    GPU,
    STORAGE,
    Line,
    Who,
    gib_months,
    gpu_types_of,
    line,
    report_columns,
    report_rows,
    run_cpu_hours,
    run_gpu_hours,
    segments,
)
from .models import MonthClose, PriceSheet, StatementLine


def price_sheets() -> QuerySet[PriceSheet]:
    """Every sheet, newest first, with its GPU prices."""
    return PriceSheet.objects.prefetch_related("gpu_prices__gpu_type").select_related("set_by")


def day_start(day: dt.date) -> dt.datetime:
    """Midnight of `day` in the portal's time zone: when a sheet of that day takes effect."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=timezone.get_current_timezone())


def sheet_in_force(at: dt.datetime | None = None) -> PriceSheet | None:
    at = at or timezone.now()
    today = timezone.localtime(at).date()
    return price_sheets().filter(effective_from__lte=today).first()


def month_bounds(month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[first midnight, next month's first midnight) of `month` in the portal's time zone."""
    following = (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return day_start(month.replace(day=1)), day_start(following)


def month_of(at: dt.datetime) -> dt.date:
    return timezone.localtime(at).date().replace(day=1)


def month_closed(month: dt.date) -> MonthClose | None:
    return MonthClose.objects.filter(month=month).select_related("closed_by").first()


# --- a month's lines, worked out ---------------------------------------------------------------

def _who_of(tenant_ids: set[int]) -> dict[int, Who]:
    """Each tenant as its statement groups it now: department, principal investigator, grants."""
    records = {record.tenant_id: record for record in ProjectRecord.objects
               .filter(tenant_id__in=tenant_ids).select_related("principal_investigator")}
    found = {}
    for tenant in Tenant.objects.filter(pk__in=tenant_ids).select_related("department"):
        record = records.get(tenant.pk)
        pi = record.principal_investigator if record is not None else None
        found[tenant.pk] = Who(
            tenant_id=tenant.pk, tenant=tenant.name,
            department=tenant.department.name if tenant.department is not None else "",
            pi_id=pi.username if pi is not None else "", pi=pi.label if pi is not None else "",
            grants=tuple(str(g) for g in (record.grants if record is not None else [])))
    return found


def lines_computed(month: dt.date, *, now: dt.datetime | None = None) -> list[Line]:
    """The month's statement lines as its runs, volumes and prices say now (up to `now` while
    it runs): every tenant's, in tenant, resource, type and time order."""
    start, end = month_bounds(month)
    end = min(end, now or timezone.now())
    if end <= start:
        return []
    changes = [(day_start(sheet.effective_from), sheet)
               for sheet in reversed(list(price_sheets()))]
    # (tenant, resource, type, span) → exact quantity, and the price in force there
    amounts: dict[tuple[int, str, str, dt.datetime, dt.datetime], Fraction] = defaultdict(Fraction)
    prices: dict[tuple[int, str, str, dt.datetime, dt.datetime], Decimal | None] = {}
    for since, until, sheet in segments(start, end, changes):
        gpu_prices = ({price.gpu_type.slug: price.per_hour for price in sheet.gpu_prices.all()}
                      if sheet is not None else {})
        runs = (runs_between(since, until)
                .values("tenant_id", "gpu_type__slug", "gpu_type__fraction_numerator",
                        "gpu_type__fraction_denominator", gpus=GPU_TOTAL, cpus=CPU_TOTAL)
                .annotate(run=Sum(run_within(since, until))))
        for row in runs:
            if not row["run"] or row["run"] <= dt.timedelta(0):
                continue
            slug = row["gpu_type__slug"]
            key = (row["tenant_id"], GPU, slug, since, until)
            amounts[key] += run_gpu_hours(row["run"], row["gpus"],
                                          row["gpu_type__fraction_numerator"],
                                          row["gpu_type__fraction_denominator"])
            prices[key] = gpu_prices.get(slug)
            key = (row["tenant_id"], CPU, "", since, until)
            amounts[key] += run_cpu_hours(row["run"], row["cpus"])
            prices[key] = sheet.cpu_hour if sheet is not None else None
        held = volume_gib_days_exact(VolumeSize.objects.all(), since=since, until=until,
                                     fields=["tenant_id"])
        for (tenant_id,), gib_days in held.items():
            key = (tenant_id, STORAGE, "", since, until)
            amounts[key] += gib_months(Fraction(gib_days), month)
            prices[key] = sheet.storage_gib_month if sheet is not None else None
    who = _who_of({key[0] for key in amounts})
    lines = [line(who[tenant_id], resource, slug, quantity, prices[key], (since, until))
             for key, quantity in amounts.items() if quantity > 0
             for tenant_id, resource, slug, since, until in [key] if tenant_id in who]
    return sorted(lines, key=lambda ln: (ln.who.tenant, ln.resource, ln.gpu_type,
                                         ln.price_from))


def lines_frozen(closed: MonthClose) -> list[Line]:
    return [Line(who=Who(tenant_id=row.tenant_id, tenant=row.tenant_name,
                         department=row.department, pi_id=row.pi, pi=row.pi_name,
                         grants=tuple(row.grants)),
                 resource=row.resource, gpu_type=row.gpu_type, quantity=row.quantity,
                 unit_price=row.unit_price, cost=row.cost, price_from=row.price_from,
                 price_until=row.price_until)
            for row in StatementLine.objects.filter(month=closed)]


# --- who sees which projects' reports ----------------------------------------------------------

def tenants_reported(identity: Identity | None) -> QuerySet[Tenant]:
    """The projects whose reports `identity` reads: admins every one, a department's admins
    its projects, a manager their current project. Readers and members none: a report holds
    what the project costs, which is for those who answer for it."""
    managed = department_project(identity)
    own = Q(keystone_project_id=managed) if managed is not None else Q(pk__in=[])
    return Tenant.objects.filter(Q(pk__in=tenants_administered(identity).values("pk")) | own)


class NoReports(Exception):
    """The caller may read no project's report (the API's 403)."""


@dataclasses.dataclass(frozen=True)
class Report:
    month: dt.date
    group_by: str
    closed: MonthClose | None
    currency: str
    columns: list[str]
    rows: list[dict[str, Any]]
    totals: dict[str, Any]
    lines: list[Line]

    @property
    def period(self) -> str:
        return f"{self.month:%Y-%m}"


def usage_report(identity: Identity | None, *, month: dt.date, group_by: str,
                 tenant: int | None = None) -> Report:
    """The month's report for `identity`: its lines (the frozen statement's once the month is
    closed) of the projects it may see, narrowed to one of them (`tenant`: another project is
    a 404, one it sees but may not report on a NoReports), grouped."""
    reported = tenants_reported(identity)
    if tenant is not None:
        if not tenants_reachable(identity).filter(pk=tenant).exists() and \
                not reported.filter(pk=tenant).exists():
            raise Http404("No such tenant.")
        reported = reported.filter(pk=tenant)
    if not reported.exists():
        raise NoReports("Reports are for the projects' managers, their departments' admins "
                        "and portal administrators.")
    closed = month_closed(month)
    every = identity is not None and identity.is_admin and tenant is None
    lines = lines_frozen(closed) if closed is not None else lines_computed(month)
    if not every:
        allowed = set(reported.values_list("pk", flat=True))
        lines = [ln for ln in lines if ln.who.tenant_id in allowed]
    currency = closed.currency if closed is not None else settings.PORTAL_BILLING_CURRENCY
    rows, totals = report_rows(lines, group_by, currency)
    return Report(month=month, group_by=group_by, closed=closed, currency=currency,
                  columns=report_columns(group_by, gpu_types_of(lines)), rows=rows,
                  totals=totals, lines=lines)


def visible_tenants_for_report(identity: Identity | None) -> QuerySet[Tenant]:
    """The projects the report page offers to narrow to."""
    return tenants_reported(identity).order_by("name")

