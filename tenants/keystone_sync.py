"""Keystone projects → tenants: new projects become tenants, vanished ones start deleting."""

from __future__ import annotations

import logging

from django.conf import settings

from identity.client import KeystoneClient

from .models import Tenant
from .services import TenantNameConfusable, tenant_ensure, tenant_mark_deleting, tenant_restore

log = logging.getLogger(__name__)


def tenants_sync_from_keystone(*, client: KeystoneClient | None = None) -> dict[str, int]:
    client = client or KeystoneClient()
    token = client.service_system_token()
    projects = [p for p in client.all_projects(token.id)
                if p.enabled and p.name != settings.KEYSTONE_SERVICE_PROJECT]
    seen = set()
    counts = {"seen": 0, "deleting": 0, "restored": 0, "refused": 0}
    for project in projects:
        try:
            tenant = tenant_ensure(keystone_project_id=project.id, name=project.name,
                                   domain_id=project.domain_id)
        except TenantNameConfusable as exc:
            log.warning("%s", exc)
            counts["refused"] += 1
            continue
        seen.add(tenant.pk)
        counts["seen"] += 1
        if tenant.state == Tenant.State.DELETING:
            tenant_restore(tenant=tenant, acting_user=None)
            counts["restored"] += 1
    vanished = Tenant.objects.exclude(pk__in=seen).exclude(
        state__in=[Tenant.State.DELETING, Tenant.State.DELETED])
    for tenant in vanished:
        tenant_mark_deleting(tenant=tenant, acting_user=None,
                             reason="its Keystone project is gone or disabled")
        counts["deleting"] += 1
    return counts
