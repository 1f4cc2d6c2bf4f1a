"""Reads of the tenants domain. Every tenant query starts from what the caller may see."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import AuditRecord, Tenant


def tenants_visible(identity) -> QuerySet[Tenant]:
    """Admins see every tenant; others the tenants of their Keystone projects."""
    queryset = Tenant.objects.select_related("quota")
    if identity is None:
        return queryset.none()
    if identity.is_admin:
        return queryset.all()
    return queryset.filter(keystone_project_id__in=[p.id for p in identity.projects])


def audit_records_visible(identity) -> QuerySet[AuditRecord]:
    if identity is None or not identity.is_admin:
        return AuditRecord.objects.none()
    return AuditRecord.objects.select_related("tenant")
