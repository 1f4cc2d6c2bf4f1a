"""The usage domain's per-tenant querysets: `restrict(identity, action)`
(identity/scoping.py). Devices and scrape targets are the cluster's, not a tenant's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import TenantScopedQuerySet

if TYPE_CHECKING:
    # the type arguments below, written as strings: models.py imports this module
    from .models import GpuSample, GpuUsageRollup, WorkloadIdle  # noqa: F401


class GpuSampleQuerySet(TenantScopedQuerySet["GpuSample"]):
    pass  # a free GPU's samples have no tenant: only admins see them


class GpuUsageRollupQuerySet(TenantScopedQuerySet["GpuUsageRollup"]):
    pass


class WorkloadIdleQuerySet(TenantScopedQuerySet["WorkloadIdle"]):
    tenant_field = "workload__tenant"
    owner_field = "workload__owner"
