"""Who opens a project's services, per tenant and per workload: `restrict(identity, action)`
(identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import TenantScopedQuerySet

if TYPE_CHECKING:
    # the type arguments below, written as strings: models.py imports this module
    from .models import SSHCertificate, SSHSession, TenantServiceAccess, WorkloadAccess  # noqa: F401


class TenantServiceAccessQuerySet(TenantScopedQuerySet["TenantServiceAccess"]):
    pass  # its change is the tenant's managers' (a row without an owner)


class WorkloadAccessQuerySet(TenantScopedQuerySet["WorkloadAccess"]):
    tenant_field = "workload__tenant"
    owner_field = "workload__owner"


class SSHCertificateQuerySet(TenantScopedQuerySet["SSHCertificate"]):
    tenant_field = "workload__tenant"
    owner_field = "user"


class SSHSessionQuerySet(TenantScopedQuerySet["SSHSession"]):
    tenant_field = "workload__tenant"
    owner_field = "user"
