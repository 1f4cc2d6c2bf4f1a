"""How API callers prove who they are: a Keystone token, or the browser session."""

from __future__ import annotations

import datetime as dt
from typing import cast

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.request import Request

from identity.access import SignedInRequest
from identity.client import KeystoneUnavailable, Project, Token, TokenInvalid
from identity.hooks import projects_seen
from identity.identity import Identity
from identity.models import User
from identity.roles import is_portal_admin
from identity.services import user_sync
from identity.tokens import validate_token


class APIRequest(Request):
    """An API request once authenticated (every view asks for a project: api/permissions.py),
    for the type checker: `identity`, read through to the Django request that the
    authentication classes put it on."""

    identity: Identity
    user: User  # authenticated: never the anonymous user


class ServiceUnavailable(exceptions.APIException):
    status_code = 503
    default_detail = "The identity service (Keystone) is unreachable."
    default_code = "identity_unavailable"


def www_authenticate() -> str:
    """OpenStack's convention: tell the client where to get a token."""
    uri = getattr(settings, "KEYSTONE_WWW_AUTHENTICATE_URI", None) or settings.KEYSTONE_URL
    return f'Keystone uri="{uri}"'


class KeystoneTokenAuthentication(BaseAuthentication):
    """`X-Auth-Token: <Keystone token scoped to a project>`; the token's project is the tenant."""

    def authenticate(self, request: Request) -> tuple[User, Token] | None:
        token_id = request.META.get("HTTP_X_AUTH_TOKEN")
        if token_id is None:
            return None
        try:
            token = validate_token(token_id.strip())
        except TokenInvalid as exc:
            raise exceptions.AuthenticationFailed("The token is invalid, expired or revoked.") from exc
        except KeystoneUnavailable as exc:
            raise ServiceUnavailable() from exc
        admin = is_portal_admin(project_name=token.project_name, role_names=token.roles,
                                system_scoped=token.system_scoped)
        if token.project_id is None and not admin:
            raise exceptions.AuthenticationFailed("The token must be scoped to a project.")
        projects = []
        if token.project_id is not None:
            projects = [Project(id=token.project_id, name=token.project_name or token.project_id,
                                domain_id=token.project_domain_id or "default")]
            projects_seen(projects)  # its tenant is recorded
        user = user_sync(token=token)
        # the token's identity, for the whole request (as the session's comes from
        # KeystoneSessionMiddleware); its tenant follows from it (tenants/middleware.py)
        cast(SignedInRequest, request._request).identity = Identity(
            unscoped=token, projects=projects, scoped=token if token.project_id else None,
            is_admin=admin, validated_at=dt.datetime.now(dt.UTC),
        )
        return user, token

    def authenticate_header(self, request: Request) -> str:
        return www_authenticate()


class PortalSessionAuthentication(SessionAuthentication):
    """The browser's session, valid only while it carries a live Keystone identity."""

    def authenticate(self, request: Request) -> tuple[User, None] | None:
        result = super().authenticate(request)
        if result is None or getattr(request._request, "identity", None) is None:
            return None
        return result
