"""Reads of the allocations domain: a project's record, who may change it, and the records
whose end is near or past."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import F, Q, QuerySet

from identity.identity import Identity
from tenants.models import Tenant
from tenants.selectors import tenants_administered

from .models import ProjectRecord, ResourceRequest


def record_of(tenant: Tenant) -> ProjectRecord:
    """The project's record; an unsaved empty one where none was written."""
    return (ProjectRecord.objects.select_related("principal_investigator", "tenant__department")
            .filter(tenant=tenant).first() or ProjectRecord(tenant=tenant))


def record_changeable(identity: Identity | None, tenant: Tenant) -> bool:
    """Admins, and the admins of the project's department, change its record."""
    return tenants_administered(identity).filter(pk=tenant.pk).exists()


def records_ending(today: dt.date) -> QuerySet[ProjectRecord]:
    """Records whose end falls within PORTAL_ALLOCATION_NOTICE_DAYS from `today` on (its last
    day included) and whose coming end was not told for that date."""
    last = today + dt.timedelta(days=settings.PORTAL_ALLOCATION_NOTICE_DAYS)
    return (ProjectRecord.objects.select_related("tenant", "principal_investigator")
            .filter(allocation_ends__gte=today, allocation_ends__lte=last)
            .exclude(ending_told_for=F("allocation_ends")))


def records_ended(today: dt.date) -> QuerySet[ProjectRecord]:
    """Records past their last day whose hold was not told for that end date."""
    return (ProjectRecord.objects.select_related("tenant", "principal_investigator")
            .filter(allocation_ends__lt=today)
            .exclude(ended_told_for=F("allocation_ends")))


def requests_visible(identity: Identity | None) -> QuerySet[ResourceRequest]:
    """The requests `identity` sees: its current project's (every role there), and those of
    the projects of the departments it administers (admins: every one)."""
    own = ResourceRequest.objects.restrict(identity, "view").values("pk")
    return ResourceRequest.objects.filter(
        Q(pk__in=own) | Q(tenant__in=tenants_administered(identity))
    ).select_related("tenant", "asker", "decided_by")


def request_decidable_by(identity: Identity | None, request: ResourceRequest) -> bool:
    """Admins, and the admins of the request's project's department, decide it."""
    return tenants_administered(identity).filter(pk=request.tenant_id).exists()
