from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission

if TYPE_CHECKING:  # DRF imports this module from its settings, while rest_framework.views loads
    from rest_framework.request import Request
    from rest_framework.views import APIView

    from identity.identity import Identity


class HasProject(BasePermission):
    """A caller with a Keystone identity: a current project, or portal-wide admin."""

    message = "You have no project in the portal. Ask your OpenStack administrator for one."

    def has_permission(self, request: Request, view: APIView) -> bool:
        identity: Identity | None = getattr(request, "identity", None)
        if identity is None:
            return False
        return identity.project is not None or identity.is_admin


class IsPortalAdmin(BasePermission):
    message = "Only portal administrators may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        identity: Identity | None = getattr(request, "identity", None)
        return bool(identity is not None and identity.is_admin)
