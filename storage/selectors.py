"""Reads of the storage domain. What a caller may see of volumes is `Volume.objects.restrict`
(storage/querysets.py)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet

from identity.identity import Identity
from identity.scoping import Action
from tenants.models import Tenant

from .models import Dataset, StorageClass, Volume, VolumeSize
from .services import storage_used

__all__ = ["storage_used", "storage_classes_offered", "volumes_visible", "volumes_mountable",
           "datasets_visible", "datasets_mountable", "datasets_open_to", "volume_sizes_visible",
           "volume_gib_days"]

DAY_SECONDS = 86400
MICROSECOND = dt.timedelta(microseconds=1)
DAY_MICROSECONDS = Decimal(DAY_SECONDS * 1_000_000)


def storage_classes_offered() -> QuerySet[StorageClass]:
    return StorageClass.objects.offered()


def volumes_visible(identity: Identity | None) -> QuerySet[Volume]:
    """The volumes the caller sees (their project's, by the volumes' rule)."""
    return Volume.objects.restrict(identity, Action.VIEW).select_related("tenant", "owner")


def volumes_mountable(identity: Identity | None, tenant: Tenant) -> QuerySet[Volume]:
    """The volumes the caller may mount in a launch in `tenant`: of that tenant, theirs to use
    (a member's own and the project's; a manager's every one), not failed."""
    return (Volume.objects.restrict(identity, Action.LAUNCH).filter(tenant=tenant)
            .exclude(state=Volume.State.FAILED).select_related("tenant", "owner"))


def datasets_visible(identity: Identity | None) -> QuerySet[Dataset]:
    """The datasets open to the caller's project (admins: every one)."""
    return Dataset.objects.restrict(identity, Action.VIEW).prefetch_related("tenants")


def datasets_mountable(identity: Identity | None, tenant: Tenant) -> QuerySet[Dataset]:
    """The datasets the caller may mount in a launch in `tenant`: open to that tenant, and
    the caller a member there (an admin launching in it: those open to it)."""
    return Dataset.objects.restrict(identity, Action.LAUNCH).filter(pk__in=_opened(tenant))


def datasets_open_to(identity: Identity | None, tenant: Tenant) -> QuerySet[Dataset]:
    """The datasets open to `tenant` that the caller sees (the project's datasets page: an
    admin signed in to a project sees that project's, not every one)."""
    return Dataset.objects.restrict(identity, Action.VIEW).filter(pk__in=_opened(tenant))


def _opened(tenant: Tenant) -> QuerySet[Dataset, int]:
    return Dataset.objects.filter(Q(open_to_all=True) | Q(tenants=tenant)).values_list(
        "pk", flat=True)


def volume_sizes_visible(identity: Identity | None) -> QuerySet[VolumeSize]:
    """The storage accounting rows the caller sees (their project's; admins: every tenant's)."""
    return VolumeSize.objects.restrict(identity, Action.VIEW)


def volume_gib_days_exact(rows: QuerySet[VolumeSize], *, since: dt.datetime,
                          until: dt.datetime, fields: list[str]) -> dict[tuple[Any, ...], Decimal]:
    """GiB-days held in [since, until), summed by `fields` (lookups of VolumeSize: the tenant,
    the owner …): each row's size from its `since` to the volume's next row (or `until`),
    clipped to the period; one query. Volumes deleted before the period are left out in it.
    Counted in GiB-microseconds (whole numbers) and divided once: exact, for what is charged."""
    gone = rows.filter(size_gib=0, since__lte=since).values("volume_id")
    found = (rows.filter(since__lt=until).exclude(volume_id__in=gone)
             .order_by("volume_id", "since", "pk")
             .values_list("volume_id", "size_gib", "since", *fields))
    held: dict[tuple[Any, ...], int] = defaultdict(int)

    def count(size: int, start: dt.datetime, end: dt.datetime, key: tuple[Any, ...]) -> None:
        span = min(end, until) - max(start, since)
        if size and span > dt.timedelta(0):
            held[key] += size * (span // MICROSECOND)

    previous: tuple[Any, ...] | None = None
    for volume_id, size, start, *key in found:
        if previous is not None:
            count(previous[1], previous[2],
                  start if previous[0] == volume_id else until, previous[3])
        previous = (volume_id, size, start, tuple(key))
    if previous is not None:
        count(previous[1], previous[2], until, previous[3])
    return {key: Decimal(micro) / DAY_MICROSECONDS for key, micro in held.items()}


def volume_gib_days(rows: QuerySet[VolumeSize], *, since: dt.datetime, until: dt.datetime,
                    fields: list[str]) -> dict[tuple[Any, ...], float]:
    """volume_gib_days_exact as floats: the usage report's figures."""
    return {key: float(gib_days) for key, gib_days in
            volume_gib_days_exact(rows, since=since, until=until, fields=fields).items()}
