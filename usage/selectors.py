"""Reads of the usage domain: the usage report over rollups (what a caller may see of them:
`GpuUsageRollup.objects.restrict`, identity/scoping.py), and beside its GPU-hours the storage
the tenants' volumes held, in GiB-days (storage's VolumeSize rows: storage.selectors)."""

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
from storage.models import Volume, VolumeSize
from storage.selectors import volume_gib_days, volume_sizes_visible
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
    # the cluster the GPUs were in (a job dispatched to a worker: the worker)
    "cluster": [("cluster", "cluster")],
}
# the columns a user's label is made of (identity.models.user_label)
USER_LABEL = ["user__username", "user__name", "user__domain_id", "user__domain_name"]
ORDER = {"tenant": ["tenant__name"], "user": ["user__name", "user__domain_name", "user__username"],
         "gpu_type": ["gpu_type__slug"], "workload": ["workload_id"], "day": ["day"],
         "cluster": ["cluster"]}
COLUMNS = ["gpu_hours_allocated", "gpu_hours_used", "utilisation_percent", "util_avg",
           "util_max", "samples", "workloads"]
STORAGE = "storage_gib_days"
# the groupings storage is counted in → the VolumeSize lookups that key it (the first one is the
# group's key column): a tenant's every volume; a user's own volumes only (`user` scope), the
# project's volumes being no one user's. A volume has no GPU type, workload or day of its own.
STORAGE_GROUPS: dict[str, list[str]] = {
    "tenant": ["tenant_id", "tenant__name"],
    "user": ["owner__username", "owner__name", "owner__domain_id", "owner__domain_name"],
}
# the GPU columns of a group that used no GPU in the period, only storage
NO_GPU: dict[str, Any] = {"gpu_hours_allocated": 0.0, "gpu_hours_used": 0.0,
                          "utilisation_percent": None, "util_avg": None, "util_max": None,
                          "samples": 0, "workloads": 0}


def report_columns(group_by: str) -> list[str]:
    return [name for _, name in GROUPS[group_by]] + COLUMNS + (
        [STORAGE] if group_by in STORAGE_GROUPS else [])


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
                 group_by: str, sizes: QuerySet[VolumeSize] | None = None
                 ) -> list[dict[str, Any]]:
    """GPU-hours allocated and used (utilisation-weighted), grouped; one SQL aggregate. By
    tenant or user, the GiB-days of storage of `sizes` (the volumes' rows to count) beside
    them (storage_report); None where there are none to count (one workload's report)."""
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
        # the mean over the samples with a utilisation (MIG instances' may have memory only)
        util_samples=Sum("samples", filter=Q(util_avg__isnull=False)),
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
            util_avg=(round(row["util_weighted"] / row["util_samples"], 1)
                      if row["util_samples"] else None),
            util_max=row["peak"], samples=samples, workloads=row["n_workloads"])
        report.append(entry)
    if group_by in STORAGE_GROUPS and sizes is not None:
        storage_report(report, sizes, since=since, until=until, group_by=group_by)
    elif group_by in STORAGE_GROUPS:  # one workload's report: no volume is a workload's
        for entry in report:
            entry[STORAGE] = None
    return report


def storage_report(report: list[dict[str, Any]], sizes: QuerySet[VolumeSize], *,
                   since: dt.datetime, until: dt.datetime, group_by: str) -> None:
    """Put each group's GiB-days of storage in its row of `report` (0 where it held none),
    and add a row, ordered as the report is, for each group that held storage but used no
    GPU in the period."""
    fields = STORAGE_GROUPS[group_by]
    if group_by == "user":
        sizes = sizes.filter(scope=Volume.Scope.USER)
    held = volume_gib_days(sizes, since=since, until=until, fields=fields)
    by_key = {key[0]: (key, gib_days) for key, gib_days in held.items()}
    key_column = GROUPS[group_by][0][1]
    for entry in report:
        entry[STORAGE] = round(by_key.pop(entry[key_column], (None, 0.0))[1], 4)
    for key, gib_days in by_key.values():
        if group_by == "tenant":
            entry = {"tenant_id": key[0], "tenant": key[1]}
        else:
            username, name, domain_id, domain_name = key
            entry = {"user_id": username, "domain": domain_name,
                     "user": user_label(name or username or "", domain_id or "",
                                        domain_name or "")}
        report.append({**entry, **NO_GPU, STORAGE: round(gib_days, 4)})
    if by_key:
        report.sort(key=lambda row: (row["tenant"],) if group_by == "tenant"
                    else (row["user"], row["domain"], row["user_id"]))


def usage_totals(report: list[dict[str, Any]], storage_gib_days: float | None = None
                 ) -> dict[str, float | None]:
    """The report's GPU-hours in all, and the GiB-days of storage of every volume it covers
    (`storage_gib_days`, None where it counts none: one workload's report)."""
    allocated = sum(r["gpu_hours_allocated"] for r in report)
    used = sum(r["gpu_hours_used"] for r in report)
    return {"gpu_hours_allocated": round(allocated, 4), "gpu_hours_used": round(used, 4),
            "utilisation_percent": round(100 * used / allocated, 1) if allocated else None,
            STORAGE: None if storage_gib_days is None else round(storage_gib_days, 4)}


def storage_total(sizes: QuerySet[VolumeSize] | None, *, since: dt.datetime,
                  until: dt.datetime) -> float | None:
    """The GiB-days every volume of `sizes` held in the period (a user's and the project's)."""
    if sizes is None:
        return None
    return sum(volume_gib_days(sizes, since=since, until=until, fields=[]).values())


def _tenant_named(identity: Identity | None, tenant: str) -> Tenant:
    """A tenant the caller sees, by id or name; 404 for another."""
    tenants = Tenant.objects.restrict(identity, Action.VIEW)
    match = tenants.filter(pk=int(tenant)) if ascii_digits(tenant) and len(tenant) <= 18 \
        else tenants.filter(name=tenant)
    found = match.first()
    if found is None:
        raise Http404("No such tenant.")
    return found


def usage_sizes_for_query(identity: Identity | None, *, tenant: str = "",
                          workload: int | None = None) -> QuerySet[VolumeSize] | None:
    """The volumes' rows the report counts storage from, as usage_rollups_for_query narrows
    the rollups (call that first: it answers 404 for what the caller may not see). None for
    one workload's report: a volume is no workload's."""
    if workload is not None:
        return None
    sizes = volume_sizes_visible(identity)
    return sizes.filter(tenant=_tenant_named(identity, tenant)) if tenant else sizes


def usage_rollups_for_query(identity: Identity | None, *, tenant: str = "", workload: int | None = None
                            ) -> QuerySet[GpuUsageRollup]:
    """The caller's visible rollups (their current project's; admins: every tenant's) narrowed
    to a tenant (id or name) and/or a workload. A tenant or workload the caller may not see is
    a 404, never an empty answer that would confirm it exists."""
    queryset = GpuUsageRollup.objects.restrict(identity, Action.VIEW)
    if tenant:
        queryset = queryset.filter(tenant=_tenant_named(identity, tenant))
    if workload is not None:
        if not Workload.objects.restrict(identity, Action.VIEW).filter(pk=workload).exists():
            raise Http404("No such workload.")
        queryset = queryset.filter(workload_id=workload)
    return queryset


def usage_report_for(identity: Identity | None, *, tenant: str, workload: int | None,
                     since: dt.datetime, until: dt.datetime, group_by: str
                     ) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """The report the API and the pages answer, and its totals: the caller's GPU-hours and
    storage, narrowed to a tenant and/or a workload (404 for one they may not see)."""
    rollups = usage_rollups_for_query(identity, tenant=tenant, workload=workload)
    sizes = usage_sizes_for_query(identity, tenant=tenant, workload=workload)
    rows = usage_report(rollups, since=since, until=until, group_by=group_by, sizes=sizes)
    return rows, usage_totals(rows, storage_total(sizes, since=since, until=until))
