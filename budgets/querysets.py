"""The budgets domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from .models import Budget, BudgetThresholdCrossed  # noqa: F401


class BudgetQuerySet(TenantScopedQuerySet["Budget"]):
    admin_only = frozenset({Action.CHANGE})  # the tenant reads its budget; admins set it


class BudgetThresholdCrossedQuerySet(TenantScopedQuerySet["BudgetThresholdCrossed"]):
    tenant_field = "budget__tenant"
    admin_only = frozenset({Action.CHANGE})
