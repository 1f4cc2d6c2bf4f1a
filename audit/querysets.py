"""The audit trail's queryset: `restrict(identity, action)` (portal/keystone/scoping.py)."""

from __future__ import annotations

from portal.keystone.scoping import Action, TenantScopedQuerySet


class AuditRecordQuerySet(TenantScopedQuerySet):
    admin_only = frozenset(Action)  # the audit trail is the admins'
