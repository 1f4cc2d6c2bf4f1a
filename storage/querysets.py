"""The storage domain's querysets: `restrict(identity, action)` (identity/scoping.py), with the
volumes' own rule on top of the one rule.

A user volume is its owner's: they see, mount and change it, and so do the project's managers.
A project volume is every member's to see and mount, and its managers' to change (grow,
delete). Readers see the project's volumes and make or mount none. Another project's volume
is a 404, as every other object's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from django.db import models
from django.db.models import Q

from identity.roles import PortalRole
from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from identity.identity import Identity

    from .models import Dataset, StorageClass, Volume, VolumeSize  # noqa: F401

USER, PROJECT = "user", "project"  # Volume.Scope's values, which models.py imports from here


class StorageClassQuerySet(models.QuerySet["StorageClass"]):
    def offered(self) -> Self:
        return self.filter(enabled=True)


class VolumeQuerySet(TenantScopedQuerySet["Volume"]):
    owner_field = "owner"

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        """The one rule (the tenant and the role), then the volume's own: below a manager,
        only one's own user volumes and, but for changes, the project's. A volume being
        deleted is nobody's."""
        rows = super().restrict(identity, action).filter(deleted_at__isnull=True)
        return rows.filter(self._volume_rule(identity, Action(action)))

    def permits(self, identity: Identity | None, action: Action | str,
                obj: models.Model) -> bool:
        if not super().permits(identity, action, obj) or getattr(obj, "deleted_at", None):
            return False
        if _manages(identity):
            return True
        assert identity is not None  # super() permits nothing without one
        scope, owner = getattr(obj, "scope", None), getattr(obj, "owner", None)
        own = getattr(owner, "keystone_user_id", None) == identity.unscoped.user_id
        if Action(action) is Action.CHANGE:
            return scope == USER and own
        return scope == PROJECT or own

    @staticmethod
    def _volume_rule(identity: Identity | None, action: Action) -> Q:
        if _manages(identity):
            return Q()
        assert identity is not None
        own = Q(scope=USER, owner__keystone_user_id=identity.unscoped.user_id)
        return own if action is Action.CHANGE else own | Q(scope=PROJECT)


class VolumeSizeQuerySet(TenantScopedQuerySet["VolumeSize"]):
    """The storage accounting's rows: every member sees the project's (as its GPU usage
    rollups), an admin every tenant's."""


class DatasetQuerySet(TenantScopedQuerySet["Dataset"]):
    """A dataset is no tenant's own: it is open to every project or to named ones. Its
    people see and mount one open to their current project (readers see it); only admins
    change one, and see every one. One not open to the caller's project is a 404."""

    admin_only = frozenset({Action.CHANGE})

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        scope = self.scope(identity, action)
        if scope.nothing:
            return self.none()
        if scope.everything:
            return self.all()
        opened = self.model.tenants.through.objects.filter(
            tenant__keystone_project_id=scope.project_id).values("dataset_id")
        return self.filter(Q(open_to_all=True) | Q(pk__in=opened))

    def permits(self, identity: Identity | None, action: Action | str,
                obj: models.Model) -> bool:
        scope = self.scope(identity, action)
        if scope.everything or scope.nothing:
            return scope.everything
        return bool(getattr(obj, "open_to_all", False)) or self.restrict(
            identity, action).filter(pk=obj.pk).exists()


def _manages(identity: Identity | None) -> bool:
    """Admins, and the project's managers: every volume of the project."""
    return identity is not None and (identity.is_admin or (
        identity.role is not None and identity.role >= PortalRole.MANAGER))
