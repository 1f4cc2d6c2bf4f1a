"""What tenants tell the apps above them, which tenants may not import (they import tenants):
a hook of core.registry.

TENANT_DELETING: called inside the transaction that marks a tenant for deletion; every entry
acts in that transaction and answers how many workloads it stopped (workloads registers
`workloads_stop_for_tenant`, so a deleted tenant's workloads stop with it; storage lets the
datasets' volumes of its namespace go, which outlive a namespace: they are cluster-scoped). The
audit record counts them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from core.registry import Hook

if TYPE_CHECKING:
    from collections.abc import Mapping
    from fractions import Fraction

    from .figures import QuotaUse
    from .models import Department, Tenant


class TenantDeleting(Protocol):
    """`user`: the acting user, None for the portal."""

    def __call__(self, *, tenant: Tenant, user: Any, reason: str) -> int: ...


class ClaimAllowance(Protocol):
    """(claims, GiB) the apps above make in the tenant's namespace beside its volumes."""

    def __call__(self, *, tenant: Tenant) -> tuple[int, int]: ...


# CLAIM_ALLOWANCES: the namespace's ResourceQuota (persistentvolumeclaims, requests.storage)
# holds the storage quota plus what every entry answers: the claims the portal makes there
# that the storage quota does not count (storage: a claim per dataset open to the tenant)
CLAIM_ALLOWANCES = Hook[ClaimAllowance]("tenants.claim_allowances", order=("storage",))

TENANT_DELETING = Hook[TenantDeleting]("tenants.tenant_deleting",
                                       order=("workloads", "storage"))


class DepartmentUse(Protocol):
    """What a department's projects use together as the portal's admission counts it."""

    def __call__(self, department: Department, *, fractions: Mapping[str, Fraction]
                 ) -> QuotaUse: ...


# DEPARTMENT_USE: the one reader of a department's use (workloads registers the one its
# admission checks a cap with); the department's page and API show what it answers
DEPARTMENT_USE = Hook[DepartmentUse]("tenants.department_use", order=("workloads",))
