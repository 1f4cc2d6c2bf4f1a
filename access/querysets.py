"""Who changes a project's rule of who opens its services: `restrict(identity, action)`
(identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import TenantScopedQuerySet

if TYPE_CHECKING:
    # the type arguments below, written as strings: models.py imports this module
    from .models import TenantServiceAccess  # noqa: F401


class TenantServiceAccessQuerySet(TenantScopedQuerySet["TenantServiceAccess"]):
    pass  # its change is the tenant's managers' (a row without an owner)
