"""The usage domain's per-tenant querysets: `restrict(identity, action)`
(identity/scoping.py). Devices and scrape targets are the cluster's, not a tenant's."""

from __future__ import annotations

from identity.scoping import TenantScopedQuerySet


class GpuSampleQuerySet(TenantScopedQuerySet):
    pass  # a free GPU's samples have no tenant: only admins see them


class GpuUsageRollupQuerySet(TenantScopedQuerySet):
    pass


class WorkloadIdleQuerySet(TenantScopedQuerySet):
    tenant_field = "workload__tenant"
    owner_field = "workload__owner"
