"""Who sees, uses and changes a secret (identity/scoping.py's rule, narrowed by scope).

- A project secret: the project's readers see that it exists (its name, kind and keys), its
  members use it in their launches, its managers (and portal admins) write and delete it.
- A user secret: its owner alone sees, uses, replaces and deletes it, while they hold a role
  in the project that lets them launch; nobody else, portal admins included (as a
  notification is addressed to one person). Another project's secret is a 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from django.db import models
from django.db.models import Q

from identity.scoping import Action, Scope, TenantScopedQuerySet, scope_for

if TYPE_CHECKING:
    from identity.identity import Identity

    # the type argument below, written as a string: models.py imports this module
    from .models import Secret  # noqa: F401

PROJECT, USER = "project", "user"


def _scopes(identity: Identity | None, action: Action | str) -> tuple[Scope, Scope]:
    """(the project secrets' scope, the user secrets' scope) for `action`: a user secret needs
    what a launch needs, in the owner's current project (an admin's too)."""
    action = Action(action)
    project = scope_for(identity, action)  # CHANGE of a row without owner: managers
    user_action = Action.VIEW if action is Action.VIEW else Action.LAUNCH
    user = scope_for(identity, user_action)
    if user.everything and identity is not None:  # an admin: their current project only
        project_id = identity.project.id if identity.project is not None else None
        user = Scope(project_id=project_id) if project_id else Scope()
    return project, user


def _user_id(identity: Identity | None) -> str | None:
    return getattr(getattr(identity, "unscoped", None), "user_id", None) or None


class SecretQuerySet(TenantScopedQuerySet["Secret"]):
    owner_field = "owner"

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        project, user = _scopes(identity, action)
        user_id = _user_id(identity)
        condition = Q(pk__in=[])
        if not project.nothing:
            rows = Q(scope=PROJECT)
            if not project.everything:
                rows &= Q(tenant__keystone_project_id=project.project_id)
            condition |= rows
        if not user.nothing and user_id:
            condition |= Q(scope=USER, tenant__keystone_project_id=user.project_id,
                           owner__keystone_user_id=user_id)
        return self.filter(condition)

    def permits(self, identity: Identity | None, action: Action | str,
                obj: models.Model) -> bool:
        project, user = _scopes(identity, action)
        tenant_project = getattr(getattr(obj, "tenant", None), "keystone_project_id", None)
        if getattr(obj, "scope", None) == PROJECT:
            return project.admits(project_id=tenant_project)
        owner_id = getattr(getattr(obj, "owner", None), "keystone_user_id", None)
        return (not user.nothing and _user_id(identity) is not None
                and owner_id == _user_id(identity) and user.admits(project_id=tenant_project))
