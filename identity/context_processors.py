from __future__ import annotations

from django.http import HttpRequest

from .identity import Identity


def identity(request: HttpRequest) -> dict[str, object]:
    """The signed-in user's projects, current project and role, for the page header."""
    ident: Identity | None = getattr(request, "identity", None)
    if ident is None:
        return {"identity": None}
    return {
        "identity": ident,
        "current_project": ident.project,
        "current_role": ident.role,
        "is_portal_admin": ident.is_admin,
    }
