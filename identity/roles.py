"""Keystone roles → portal roles. The one place where this mapping lives.

Keystone's default roles imply each other (admin ⊃ manager ⊃ member ⊃ reader) and tokens list
the implied roles too, so the strongest role in a token decides.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from django.conf import settings


class PortalRole(enum.IntEnum):
    """What a user may do in one project. Ordered: a higher role can do all a lower one can."""

    READER = 1  # see the project's workloads, quotas and usage
    MEMBER = 2  # launch workloads and manage their own
    MANAGER = 3  # manage every workload of the project
    ADMIN = 4  # everything, in every project

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def can_launch(self) -> bool:
        return self >= PortalRole.MEMBER

    @property
    def can_manage_all(self) -> bool:
        return self >= PortalRole.MANAGER


# Keystone role name → portal role. Roles not listed here (e.g. `service`) grant nothing.
KEYSTONE_ROLE_MAP: dict[str, PortalRole] = {
    "reader": PortalRole.READER,
    "member": PortalRole.MEMBER,
    "_member_": PortalRole.MEMBER,  # the pre-Queens default role name, still found on old clouds
    "manager": PortalRole.MANAGER,
    "admin": PortalRole.ADMIN,
}


def project_role(role_names: Iterable[str]) -> PortalRole | None:
    """The portal role that a project-scoped token's roles give in that project (None: no access).

    An `admin` role on an ordinary project makes the user a manager there; portal-wide admin
    comes only from `is_portal_admin` (the admin project, or system scope).
    """
    roles = [KEYSTONE_ROLE_MAP[name] for name in role_names if name in KEYSTONE_ROLE_MAP]
    if not roles:
        return None
    return min(max(roles), PortalRole.MANAGER)


def is_portal_admin(*, project_name: str | None, role_names: Iterable[str], system_scoped: bool) -> bool:
    """Admin everywhere: the admin role on the admin project, or a system-scoped admin token."""
    if settings.KEYSTONE_ADMIN_ROLE not in set(role_names):
        return False
    return system_scoped or project_name == settings.KEYSTONE_ADMIN_PROJECT


def effective_role(project_role_: PortalRole | None, *, portal_admin: bool) -> PortalRole | None:
    """The role the portal acts on: a portal admin is ADMIN in every project."""
    return PortalRole.ADMIN if portal_admin else project_role_
