"""The tenants domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    # the type arguments below, written as strings: models.py imports this module
    from .models import GpuQuota, Quota, QuotaAdjustment, StorageClassQuota, Tenant  # noqa: F401


class TenantQuerySet(TenantScopedQuerySet["Tenant"]):
    tenant_field = ""  # a tenant is its own


class QuotaQuerySet(TenantScopedQuerySet["Quota"]):
    admin_only = frozenset({Action.CHANGE})  # a tenant reads its quota; admins set it


class GpuQuotaQuerySet(TenantScopedQuerySet["GpuQuota"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})


class StorageClassQuotaQuerySet(TenantScopedQuerySet["StorageClassQuota"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})


class QuotaAdjustmentQuerySet(TenantScopedQuerySet["QuotaAdjustment"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})  # their writers are the portal's own beats
