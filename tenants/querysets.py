"""The tenants domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from identity.scoping import Action, TenantScopedQuerySet


class TenantQuerySet(TenantScopedQuerySet):
    tenant_field = ""  # a tenant is its own


class QuotaQuerySet(TenantScopedQuerySet):
    admin_only = frozenset({Action.CHANGE})  # a tenant reads its quota; admins set it


class GpuQuotaQuerySet(TenantScopedQuerySet):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})
