from rest_framework.permissions import BasePermission


class HasProject(BasePermission):
    """A caller with a Keystone identity: a current project, or portal-wide admin."""

    message = "You have no project in the portal. Ask your OpenStack administrator for one."

    def has_permission(self, request, view) -> bool:
        identity = getattr(request, "identity", None)
        if identity is None:
            return False
        return identity.project is not None or identity.is_admin


class IsPortalAdmin(BasePermission):
    message = "Only portal administrators may do this."

    def has_permission(self, request, view) -> bool:
        identity = getattr(request, "identity", None)
        return bool(identity is not None and identity.is_admin)
