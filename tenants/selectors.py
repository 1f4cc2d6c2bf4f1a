"""Reads of the tenants domain. What a caller may see of tenants is `Tenant.objects.restrict`
(identity/scoping.py)."""

from __future__ import annotations

from django.conf import settings

from identity.identity import Identity

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


def tenant_current(identity: Identity | None) -> Tenant | None:
    """The tenant of the identity's current project (None: none, or not yet known). The
    request's tenant (tenants/middleware.py, api/authentication.py) comes from here."""
    if identity is None or identity.project is None:
        return None
    return (Tenant.objects.select_related("quota")
            .filter(keystone_project_id=identity.project.id).first())
