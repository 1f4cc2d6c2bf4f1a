"""The tenants domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from django.db import models
from django.db.models import Q

from identity.roles import PortalRole
from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from identity.identity import Identity

    # the type arguments below, written as strings: models.py imports this module
    from .models import (  # noqa: F401
        Department,
        GpuQuota,
        Quota,
        QuotaAdjustment,
        StorageClassQuota,
        Tenant,
    )


def department_project(identity: Identity | None) -> str | None:
    """The Keystone project whose departments `identity` administers: its current project,
    where it is a manager (a department's admins are its project's managers, through Keystone
    groups too); None for everyone else. Portal admins administer every department anyway."""
    if identity is None or identity.project is None or identity.role is None:
        return None
    return identity.project.id if identity.role >= PortalRole.MANAGER else None


class DepartmentQuerySet(models.QuerySet["Department"]):
    """Departments: admins see and change every one; a department's admins see theirs; the
    people of a project see its department. Another's is a 404; changes are admins'."""

    def administered_by(self, identity: Identity | None) -> Self:
        """The departments `identity` acts for as a department admin (admins: every one)."""
        if identity is not None and identity.is_admin:
            return self.all()
        project_id = department_project(identity)
        if project_id is None:
            return self.none()
        return self.filter(keystone_project_id=project_id)

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        if identity is None:
            return self.none()
        if identity.is_admin:
            return self.all()
        if Action(action) is not Action.VIEW or identity.project is None:
            return self.none()
        condition = Q(tenants__keystone_project_id=identity.project.id)
        project_id = department_project(identity)
        if project_id is not None:
            condition |= Q(keystone_project_id=project_id)
        return self.filter(condition).distinct()


class TenantQuerySet(TenantScopedQuerySet["Tenant"]):
    tenant_field = ""  # a tenant is its own


class QuotaQuerySet(TenantScopedQuerySet["Quota"]):
    admin_only = frozenset({Action.CHANGE})  # a tenant reads its quota; admins set it


class GpuQuotaQuerySet(TenantScopedQuerySet["GpuQuota"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})


class StorageClassQuotaQuerySet(TenantScopedQuerySet["StorageClassQuota"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})


class QuotaAdjustmentQuerySet(TenantScopedQuerySet["QuotaAdjustment"]):
    tenant_field = "quota__tenant"
    admin_only = frozenset({Action.CHANGE})  # their writers are the portal's own beats
