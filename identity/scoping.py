"""Tenant scoping: which tenants' rows an identity may act on, and how. The one rule.

Every tenant-owned model's queryset is a `TenantScopedQuerySet`, so every read that a page or
the API makes starts from `Model.objects.restrict(identity, action)` (after NetBox's
`restrict(user, action)`); the base views apply it for every method (api/viewsets.py,
identity/access.py). The rule, for an identity (identity/identity.py):

- no identity: nothing;
- a portal admin: everything, in every tenant;
- anyone else: only their CURRENT project's tenant, and there by their role in it
  (identity/roles.py):
    view    reader and up
    launch  member and up
    change  a row with an owner (a workload): its owner if a member, every one if a manager;
            a row without one (the tenant's own settings): managers
- `admin_only` actions of a model (quota writes, the audit trail): admins alone.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any, Self, TypeVar

from django.db import models
from django.db.models import Q

from .roles import PortalRole

if TYPE_CHECKING:
    from .identity import Identity


class Action(enum.StrEnum):
    VIEW = "view"
    LAUNCH = "launch"
    CHANGE = "change"


MIN_ROLE = {Action.VIEW: PortalRole.READER, Action.LAUNCH: PortalRole.MEMBER,
            Action.CHANGE: PortalRole.MEMBER}


@dataclasses.dataclass(frozen=True)
class Scope:
    """What `scope_for` allows: everything, one project (and in it perhaps only the rows one
    Keystone user owns), or nothing."""

    everything: bool = False
    project_id: str | None = None
    owner_id: str | None = None  # a Keystone user id: only the rows they own

    @property
    def nothing(self) -> bool:
        return not self.everything and self.project_id is None

    def admits(self, *, project_id: str | None, owner_id: str | None = None) -> bool:
        """Whether a row of this project (owned by this Keystone user) is inside the scope."""
        if self.everything:
            return True
        if self.nothing or project_id != self.project_id:
            return False
        return self.owner_id is None or (owner_id is not None and owner_id == self.owner_id)


EVERYTHING = Scope(everything=True)
NOTHING = Scope()


def scope_for(identity: Identity | None, action: Action | str, *, owned: bool = False,
              admin_only: bool = False) -> Scope:
    """The rule above. `owned`: the rows have an owner; `admin_only`: the model keeps this
    action to portal admins."""
    action = Action(action)
    if identity is None:
        return NOTHING
    if identity.is_admin:
        return EVERYTHING
    project, role = identity.project, identity.role
    if admin_only or project is None or role is None:
        return NOTHING
    needed = MIN_ROLE[action]
    if action is Action.CHANGE and not owned:
        needed = PortalRole.MANAGER
    if role < needed:
        return NOTHING
    if action is Action.CHANGE and owned and not role.can_manage_all:
        return Scope(project_id=project.id, owner_id=identity.unscoped.user_id)
    return Scope(project_id=project.id)


def _follow(obj: Any, path: str) -> Any:
    for name in filter(None, path.split("__")):
        if obj is None:
            return None
        obj = getattr(obj, name)
    return obj


_M = TypeVar("_M", bound=models.Model)


class TenantScopedQuerySet(models.QuerySet[_M]):
    """A tenant-owned model's queryset. Subclasses name the path to the tenant and, where rows
    have one, to the owner; `objects = XQuerySet.as_manager()` puts `restrict` and `permits`
    on the model's manager. Parameterised by the model (`TenantScopedQuerySet["Tenant"]`), its
    rows come out typed."""

    tenant_field: str = "tenant"  # the lookup path to the Tenant ("" on Tenant itself)
    owner_field: str | None = None  # the lookup path to the owning user, if rows have one
    admin_only: frozenset[Action] = frozenset()

    def scope(self, identity: Identity | None, action: Action | str) -> Scope:
        action = Action(action)
        return scope_for(identity, action, owned=self.owner_field is not None,
                         admin_only=action in self.admin_only)

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        """Only the rows `identity` may `action` (none for no identity)."""
        scope = self.scope(identity, action)
        if scope.nothing:
            return self.none()
        if scope.everything:
            return self.all()
        prefix = f"{self.tenant_field}__" if self.tenant_field else ""
        condition = Q(**{f"{prefix}keystone_project_id": scope.project_id})
        if scope.owner_id is not None:
            condition &= Q(**{f"{self.owner_field}__keystone_user_id": scope.owner_id})
        return self.filter(condition)

    def permits(self, identity: Identity | None, action: Action | str, obj: models.Model) -> bool:
        """`restrict` for a row already in hand, without a query (when its tenant and owner
        are loaded)."""
        scope = self.scope(identity, action)
        if scope.everything or scope.nothing:
            return scope.everything
        tenant = _follow(obj, self.tenant_field)
        owner = (_follow(obj, self.owner_field)
                 if scope.owner_id is not None and self.owner_field is not None else None)
        return scope.admits(project_id=getattr(tenant, "keystone_project_id", None),
                            owner_id=getattr(owner, "keystone_user_id", None))


def tenant_scoped(rows: models.QuerySet[_M]) -> TenantScopedQuerySet[_M]:
    """`rows` as the `TenantScopedQuerySet` that every tenant-owned model's manager gives (for
    code that reaches a model generically: the page decorators, the API's base views)."""
    if not isinstance(rows, TenantScopedQuerySet):
        raise TypeError(f"{rows.model.__name__}'s rows are not tenant-scoped (identity/scoping.py)")
    return rows
