"""The allocations domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from .models import ProjectRecord, ResourceRequest  # noqa: F401


class ProjectRecordQuerySet(TenantScopedQuerySet["ProjectRecord"]):
    """A project's people read its record; admins (and, through allocations.selectors, its
    department's admins) change it."""

    admin_only = frozenset({Action.CHANGE})


class ResourceRequestQuerySet(TenantScopedQuerySet["ResourceRequest"]):
    """A project's requests: its people see them, members and up ask (Action.LAUNCH); deciding
    is for admins and the project's department admins (allocations.selectors)."""

    owner_field = "asker"
