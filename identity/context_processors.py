def identity(request):
    """The signed-in user's projects, current project and role, for the page header."""
    ident = getattr(request, "identity", None)
    if ident is None:
        return {"identity": None}
    return {
        "identity": ident,
        "current_project": ident.project,
        "current_role": ident.role,
        "is_portal_admin": ident.is_admin,
    }
