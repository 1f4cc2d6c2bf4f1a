"""The audit trail: every admin change and every provisioning action that changed the cluster."""

from __future__ import annotations

from typing import Any

from .models import AuditRecord


def audit_record(*, actor, action: str, tenant=None, target: str = "",
                 before: Any = None, after: Any = None) -> AuditRecord:
    """Write one record. `actor` is a user, or None for the portal itself ("system")."""
    return AuditRecord.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=getattr(actor, "username", None) or "system",
        tenant=tenant, action=action, target=target[:255], before=before, after=after,
    )
