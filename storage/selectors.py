"""Reads of the storage domain. What a caller may see of volumes is `Volume.objects.restrict`
(storage/querysets.py)."""

from __future__ import annotations

from django.db.models import QuerySet

from identity.identity import Identity
from identity.scoping import Action
from tenants.models import Tenant

from .models import StorageClass, Volume
from .services import storage_used

__all__ = ["storage_used", "storage_classes_offered", "volumes_visible", "volumes_mountable"]


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
