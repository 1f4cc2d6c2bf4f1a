"""Reads of the storage domain. What a caller may see of volumes is `Volume.objects.restrict`
(storage/querysets.py)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from identity.identity import Identity
from identity.scoping import Action
from tenants.models import Tenant

from .models import Dataset, StorageClass, Volume
from .services import storage_used

__all__ = ["storage_used", "storage_classes_offered", "volumes_visible", "volumes_mountable",
           "datasets_visible", "datasets_mountable", "datasets_open_to"]


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
