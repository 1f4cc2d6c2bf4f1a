"""Reads of the tenants domain. Every tenant query starts from what the caller may see."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from audit.models import AuditRecord

from .manifests import enforced_level, level_admits_root
from .models import Tenant


def tenant_pod_security(tenant: Tenant) -> str:
    """The Pod Security level the tenant's namespace enforces (PORTAL_POD_SECURITY_ENFORCE,
    "baseline" instead of "restricted" where an admin allows root templates)."""
    return enforced_level(settings.PORTAL_POD_SECURITY_ENFORCE,
                          allow_root=tenant.allow_root_templates)


def tenant_admits_root(tenant: Tenant) -> bool:
    """Whether a template that may run as root can run in the tenant's namespace."""
    return level_admits_root(tenant_pod_security(tenant))


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
