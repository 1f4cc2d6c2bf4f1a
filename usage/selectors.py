"""Reads of the usage domain: the usage report over rollups (what a caller may see of them:
`GpuUsageRollup.objects.restrict`, identity/scoping.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import Http404
from django.utils import timezone

from core.validation import ascii_digits
from identity.identity import Identity
from identity.models import user_label
from identity.scoping import Action
from tenants.models import Tenant
from workloads.models import Workload

from .models import GpuUsageRollup

MINUTE, HOUR = GpuUsageRollup.Granularity.MINUTE, GpuUsageRollup.Granularity.HOUR

# group_by → (the grouping columns, how they are named in the report)
GROUPS: dict[str, list[tuple[str, str]]] = {
    "tenant": [("tenant_id", "tenant_id"), ("tenant__name", "tenant")],
    # a user by their Keystone user id (`username`), shown by name and domain
    "user": [("user__username", "user_id"), ("user__name", "user"),
             ("user__domain_name", "domain")],
    "gpu_type": [("gpu_type__slug", "gpu_type"), ("gpu_type__name", "gpu_type_name")],
    "workload": [("workload_id", "workload_id"), ("workload__name", "workload"),
                 ("tenant__name", "tenant"), ("user__name", "user"),
                 ("gpu_type__slug", "gpu_type")],
    "day": [("day", "day")],
}
# the columns a user's label is made of (identity.models.user_label)
USER_LABEL = ["user__username", "user__name", "user__domain_id", "user__domain_name"]
ORDER = {"tenant": ["tenant__name"], "user": ["user__name", "user__domain_name", "user__username"],
         "gpu_type": ["gpu_type__slug"], "workload": ["workload_id"], "day": ["day"]}
COLUMNS = ["gpu_hours_allocated", "gpu_hours_used", "utilisation_percent", "util_avg",
           "util_max", "samples", "workloads"]


def report_columns(group_by: str) -> list[str]:
    return [name for _, name in GROUPS[group_by]] + COLUMNS


def _ceil_hour(t: dt.datetime) -> dt.datetime:
    floor = t.replace(minute=0, second=0, microsecond=0)
    return floor if floor == t else floor + dt.timedelta(hours=1)


def rollups_between(queryset: QuerySet[GpuUsageRollup], since: dt.datetime,
                    until: dt.datetime) -> QuerySet[GpuUsageRollup]:
    """The rollups that cover [since, until) once each: hour rollups for the whole hours
    inside, minute rollups for the ragged ends (to the minute)."""
    since_minute = since.replace(second=0, microsecond=0)
    first_hour, last_hour = _ceil_hour(since), until.replace(minute=0, second=0, microsecond=0)
    if first_hour >= last_hour:
        return queryset.filter(granularity=MINUTE, bucket_start__gte=since_minute,
                               bucket_start__lt=until)
    return queryset.filter(
        Q(granularity=HOUR, bucket_start__gte=first_hour, bucket_start__lt=last_hour)
        | Q(granularity=MINUTE, bucket_start__gte=since_minute, bucket_start__lt=first_hour)
        | Q(granularity=MINUTE, bucket_start__gte=last_hour, bucket_start__lt=until))


def usage_report(queryset: QuerySet[GpuUsageRollup], *, since: dt.datetime, until: dt.datetime,
                 group_by: str) -> list[dict[str, Any]]:
    """GPU-hours allocated and used (utilisation-weighted), grouped; one SQL aggregate."""
    rollups = rollups_between(queryset, since, until).order_by()
    if group_by == "day":
        rollups = rollups.annotate(day=TruncDate("bucket_start",
                                                 tzinfo=timezone.get_current_timezone()))
    fields = [field for field, _ in GROUPS[group_by]]
    if "user__name" in fields:
        fields += [field for field in USER_LABEL if field not in fields]
    rows = rollups.values(*fields).annotate(
        allocated=Sum("gpu_seconds_allocated"), used=Sum("gpu_seconds_used"),
        n_samples=Sum("samples"), util_weighted=Sum(F("util_avg") * F("samples")),
        peak=Max("util_max"), n_workloads=Count("workload_id", distinct=True),
    ).order_by(*ORDER[group_by])
    report = []
    for row in rows:
        entry: dict[str, Any] = {name: row[field] for field, name in GROUPS[group_by]}
        if "user__name" in row:  # two users of one name in two domains stay apart
            entry["user"] = user_label(row["user__name"] or row["user__username"] or "",
                                       row["user__domain_id"] or "", row["user__domain_name"] or "")
        allocated, used = row["allocated"] or 0.0, row["used"] or 0.0
        samples = row["n_samples"] or 0
        entry.update(
            gpu_hours_allocated=round(allocated / 3600, 4),
            gpu_hours_used=round(used / 3600, 4),
            utilisation_percent=round(100 * used / allocated, 1) if allocated else None,
            util_avg=round(row["util_weighted"] / samples, 1) if samples else None,
            util_max=row["peak"], samples=samples, workloads=row["n_workloads"])
        report.append(entry)
    return report


def usage_totals(report: list[dict[str, Any]]) -> dict[str, float]:
    allocated = sum(r["gpu_hours_allocated"] for r in report)
    used = sum(r["gpu_hours_used"] for r in report)
    return {"gpu_hours_allocated": round(allocated, 4), "gpu_hours_used": round(used, 4),
            "utilisation_percent": round(100 * used / allocated, 1) if allocated else None}


def usage_rollups_for_query(identity: Identity | None, *, tenant: str = "", workload: int | None = None
                            ) -> QuerySet[GpuUsageRollup]:
    """The caller's visible rollups (their current project's; admins: every tenant's) narrowed
    to a tenant (id or name) and/or a workload. A tenant or workload the caller may not see is
    a 404, never an empty answer that would confirm it exists."""
    queryset = GpuUsageRollup.objects.restrict(identity, Action.VIEW)
    if tenant:
        tenants = Tenant.objects.restrict(identity, Action.VIEW)
        match = tenants.filter(pk=int(tenant)) if ascii_digits(tenant) and len(tenant) <= 18 \
            else tenants.filter(name=tenant)
        found = match.first()
        if found is None:
            raise Http404("No such tenant.")
        queryset = queryset.filter(tenant=found)
    if workload is not None:
        if not Workload.objects.restrict(identity, Action.VIEW).filter(pk=workload).exists():
            raise Http404("No such workload.")
        queryset = queryset.filter(workload_id=workload)
    return queryset
