"""Writes of the tenants domain."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from .models import Tenant
from .naming import namespace_name


def tenant_ensure(*, keystone_project_id: str, name: str, domain_id: str = "default") -> Tenant:
    """The tenant row of a Keystone project, created on first sight; a renamed project keeps
    its namespace (a namespace cannot be renamed), only the display name follows Keystone."""
    tenant = Tenant.objects.filter(keystone_project_id=keystone_project_id).first()
    if tenant is not None:
        if tenant.name != name or tenant.domain_id != domain_id:
            tenant.name, tenant.domain_id = name, domain_id
            tenant.save(update_fields=["name", "domain_id", "updated_at"])
        return tenant
    # The digest makes collisions between projects all but impossible; should two ids still
    # share a digest prefix, a longer digest settles it.
    for digest_length in (6, 10, 16, 32):
        namespace = namespace_name(project_name=name, project_id=keystone_project_id,
                                   prefix=settings.PORTAL_NAMESPACE_PREFIX,
                                   digest_length=digest_length)
        if Tenant.objects.filter(namespace=namespace).exists():
            continue
        try:
            with transaction.atomic():
                return Tenant.objects.create(keystone_project_id=keystone_project_id, name=name,
                                             domain_id=domain_id, namespace=namespace)
        except IntegrityError:
            existing = Tenant.objects.filter(keystone_project_id=keystone_project_id).first()
            if existing is not None:  # a concurrent first login created it
                return existing
    raise RuntimeError(f"no free namespace name for project {keystone_project_id}")
