"""Reads of secrets: what a caller sees and may use (querysets.py holds the rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet

from identity.scoping import Action
from tenants.models import Tenant

from .models import Secret

if TYPE_CHECKING:
    from identity.identity import Identity


def secrets_visible(identity: Identity | None, tenant: Tenant | None = None) -> QuerySet[Secret]:
    """The secrets `identity` sees (names, kinds, keys), of `tenant` when given."""
    rows = Secret.objects.restrict(identity, Action.VIEW).select_related("tenant", "owner")
    return rows.filter(tenant=tenant) if tenant is not None else rows


def secrets_usable(identity: Identity | None, tenant: Tenant) -> QuerySet[Secret]:
    """The secrets a launch of `identity`'s in `tenant` may name (the launch form's choice)."""
    return Secret.objects.restrict(identity, Action.LAUNCH).filter(tenant=tenant) \
        .select_related("tenant", "owner")


def secret_may_change(identity: Identity | None, secret: Secret) -> bool:
    return Secret.objects.permits(identity, Action.CHANGE, secret)


def secret_may_create(identity: Identity | None, tenant: Tenant, scope: str) -> bool:
    """A user secret: anyone who may launch in the project; a project secret: its managers."""
    action = Action.CHANGE if scope == Secret.Scope.PROJECT else Action.LAUNCH
    return Tenant.objects.permits(identity, action, tenant)
