"""The API's token authentication with the caller's tenant: the token's project is the tenant.

api/authentication.py proves who the caller is (and, through identity's
PROJECTS_SEEN, gets the token's project its tenant); this puts that tenant on the request
once, as tenants/middleware.py does for the browser's session, which DRF authenticates only
after the middleware ran. portal/settings.py names this class for DRF.
"""

from __future__ import annotations

from typing import cast

from rest_framework.request import Request

from api.authentication import APIRequest, KeystoneTokenAuthentication
from identity.client import Token
from identity.models import User

from .middleware import ProjectRequest
from .models import Tenant
from .selectors import tenant_current


class TenantAPIRequest(APIRequest):
    """An API request with the caller's tenant (None: no tenant for the token's project)."""

    tenant: Tenant | None


class TenantTokenAuthentication(KeystoneTokenAuthentication):
    def authenticate(self, request: Request) -> tuple[User, Token] | None:
        result = super().authenticate(request)
        if result is not None:
            django_request = cast(ProjectRequest, request._request)
            django_request.tenant = tenant_current(django_request.identity)
        return result
