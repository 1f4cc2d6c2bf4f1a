"""Who opens a project's services, per tenant and per workload: `restrict(identity, action)`
(identity/scoping.py)."""

from __future__ import annotations

from identity.scoping import TenantScopedQuerySet


class TenantServiceAccessQuerySet(TenantScopedQuerySet):
    pass  # its change is the tenant's managers' (a row without an owner)


class WorkloadAccessQuerySet(TenantScopedQuerySet):
    tenant_field = "workload__tenant"
    owner_field = "workload__owner"
