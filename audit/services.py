"""The audit trail: every admin change and every provisioning action that changed the cluster."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import Model

from identity.models import User

from .models import AuditRecord

# who made a change, for the audit trail: a signed-in user, or None for the portal itself
Actor = AbstractBaseUser | AnonymousUser | None


def audit_record(*, actor: Actor, action: str,
                 tenant: Model | None = None, target: str = "",
                 before: Any = None, after: Any = None) -> AuditRecord:
    """Write one record. `actor` is a user, or None for the portal itself ("system"); `tenant`
    a tenants.Tenant (a layer above this one: by its id)."""
    user = actor if isinstance(actor, User) and actor.pk else None
    return AuditRecord.objects.create(
        actor=user, actor_user_id=user.username if user is not None else "",
        actor_name=user.label if user is not None else "system",
        tenant_id=tenant.pk if tenant is not None else None,
        action=action, target=target[:255], before=before, after=after,
    )
