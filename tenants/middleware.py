"""`request.tenant`: the tenant of the signed-in identity's current project, resolved once per
request (None: no identity, no current project, or a project the portal has no tenant for).

It runs after KeystoneSessionMiddleware (which puts `request.identity` on the request). An API
caller with a Keystone token gets both from api/authentication.py instead, which replaces
them when DRF authenticates the request.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

from identity.access import SignedInRequest

from .models import Tenant
from .selectors import tenant_current


class ProjectRequest(SignedInRequest):
    """The request of a view under `project_required`: `request.tenant` is the current
    project's tenant, None when the portal has none for it."""

    tenant: Tenant | None


class TenantRequest(ProjectRequest):
    """The request of a view under `tenant_required`: the tenant is there."""

    tenant: Tenant


class CurrentTenantMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: ProjectRequest) -> HttpResponseBase:
        request.tenant = tenant_current(getattr(request, "identity", None))
        return self.get_response(request)
