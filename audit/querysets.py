"""The audit trail's queryset: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    # the type argument below, written as a string: models.py imports this module
    from .models import AuditRecord  # noqa: F401


class AuditRecordQuerySet(TenantScopedQuerySet["AuditRecord"]):
    admin_only = frozenset(Action)  # the audit trail is the admins'
