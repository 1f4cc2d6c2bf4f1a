"""The audit trail's queryset: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from identity.scoping import Action, TenantScopedQuerySet


class AuditRecordQuerySet(TenantScopedQuerySet):
    admin_only = frozenset(Action)  # the audit trail is the admins'
