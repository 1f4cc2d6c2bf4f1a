"""The portal as the OpenID Connect provider of the workloads' proxies (django-oauth-toolkit).

- The authorization endpoint (`WorkloadAuthorizationView`) admits a signed-in user only when
  the tenant's rule lets them open that workload; otherwise a 403 page says why (and it is
  logged). The user's role is asked of Keystone then, not taken from the session.
- Each proxy session is tied to the portal session it came from (`ProxySession`). The proxy
  refreshes its tokens every PORTAL_AUTH_PROXY_RECHECK_SECONDS; each refresh checks that the
  portal session is still there, its Keystone token still valid, the workload still running
  and the user still allowed. A refusal is `invalid_grant`, on which oauth2-proxy drops the
  session: a user removed from the project, or signed out of the portal, is out within a
  minute. If the portal cannot be reached, the proxy keeps the session until its ID token
  expires (PORTAL_AUTH_PROXY_OFFLINE_SECONDS).
- The redirect URI must be the workload's own callback (`access.callback_url`).
- The client a request is for is the one django-oauth-toolkit acts on: the query's on GET (what
  oauthlib validates), the form body's on POST (what `AuthorizationView.form_valid` hands the
  library). A POST whose query names another client, or a parameter given twice, is refused
  (400) before anything runs. The rule is enforced again where the library saves the code
  (`save_authorization_code`) and where the proxy redeems it (`validate_code`), so no request
  shape that reaches the library past the view's check gets a session it may not have.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.contrib.sessions.backends.db import SessionStore
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from oauth2_provider.models import Application, RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.views import AuthorizationView
from oauthlib.common import Request as OAuthRequest
from oauthlib.oauth2.rfc6749.errors import AccessDeniedError

from access.rules import Decision
from access.services import identity_claims
from identity import identity as identity_store
from identity.access import SignedInRequest
from identity.assignments import project_role_now
from identity.client import KeystoneUnavailable, TokenInvalid
from identity.models import User
from identity.tokens import validate_token_now

from .access import access_decision, callback_url
from .models import ProxySession, Workload, WorkloadAccess

log = logging.getLogger(__name__)


def _workload_of(client_id: str) -> Workload | None:
    access = (WorkloadAccess.objects.select_related("workload__tenant", "workload__template")
              .filter(application__client_id=client_id).first())
    return access.workload if access else None


def user_decision(*, workload: Workload, user: User, is_admin: bool, ssh: bool = False
                  ) -> Decision:
    """The rule (`ssh`: SSH's), with the user's role on the workload's project as Keystone has
    it now."""
    try:
        role = project_role_now(user.keystone_user_id or "", workload.tenant.keystone_project_id)
    except KeystoneUnavailable:
        return Decision(False, "Keystone cannot be reached to check your role; try again in "
                               "a moment.")
    return access_decision(workload=workload, user=user, role=role, is_admin=is_admin, ssh=ssh)


class PortalOAuth2Validator(OAuth2Validator):
    oidc_claim_scope = None  # every claim below goes into the ID token and userinfo

    def get_additional_claims(self, request: OAuthRequest) -> dict[str, object]:
        return identity_claims(request.user)

    def validate_redirect_uri(self, client_id: str, redirect_uri: str, request: OAuthRequest,
                              *args: Any, **kwargs: Any) -> bool:
        workload = _workload_of(client_id)
        if workload is None:
            allowed: bool = super().validate_redirect_uri(client_id, redirect_uri, request,
                                                          *args, **kwargs)
            return allowed
        expected = callback_url(workload)
        return bool(expected) and redirect_uri == expected

    def get_default_redirect_uri(self, client_id: str, request: OAuthRequest, *args: Any,
                                 **kwargs: Any) -> str | None:
        workload = _workload_of(client_id)
        return callback_url(workload) if workload else None

    def save_authorization_code(self, client_id: str, code: dict[str, str], request: OAuthRequest,
                                *args: Any, **kwargs: Any) -> None:
        workload = _workload_of(client_id)
        session_key: str | None = getattr(request, "portal_session_key", None)
        if workload is not None:
            # the rule again, for the client the code is being saved for, whatever the view
            # checked: no code for a workload without a portal session that may open it
            reason = _refusal_for_session(workload, request.user, session_key)
            if reason:
                log.warning("authorization code refused: workload=%s user=%s: %s", workload.pk,
                            getattr(request.user, "username", "?"), reason)
                raise AccessDeniedError(description=reason, state=getattr(request, "state", None),
                                        request=request)
        super().save_authorization_code(client_id, code, request, *args, **kwargs)
        if workload is not None:
            assert session_key  # (refused above without one)
            ProxySession.objects.create(workload=workload, user=request.user,
                                        portal_session_key=session_key, code=code["code"])

    def validate_code(self, client_id: str, code: str, client: Application,
                      request: OAuthRequest, *args: Any, **kwargs: Any) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        workload = _workload_of(client_id)
        if workload is None:
            return True
        # redeemed by the workload's proxy: the code must come from a proxy session of this
        # workload, whose user may still open it
        session = (ProxySession.objects.select_related("user")
                   .filter(code=code, workload=workload).first())
        reason = _still_allowed(session, workload)
        if session is not None and session.user_id != request.user.pk:
            reason = "the code was issued to another user"
        if reason:
            _session_end(session, reason, f"authorization code refused at redemption: "
                                          f"workload={workload.pk} user={request.user.username}")
            return False
        return True

    def _save_bearer_token(self, token: dict[str, Any], request: OAuthRequest, *args: Any,
                           **kwargs: Any) -> None:
        super()._save_bearer_token(token, request, *args, **kwargs)  # (it answers nothing)
        fresh = token.get("refresh_token")
        if fresh and request.grant_type == "authorization_code":
            family = (RefreshToken.objects.filter(token_checksum=_checksum(fresh))
                      .values_list("token_family", flat=True).first())
            ProxySession.objects.filter(code=request.code).update(token_family=family, code=None)

    def validate_refresh_token(self, refresh_token: str, client: Application,
                               request: OAuthRequest, *args: Any, **kwargs: Any) -> bool:
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        workload = _workload_of(client.client_id)
        if workload is None:
            return True
        instance = request.refresh_token_instance
        session = (ProxySession.objects.select_related("user")
                   .filter(token_family=instance.token_family).first()
                   if instance.token_family else None)
        reason = _still_allowed(session, workload)
        if reason:
            _session_end(session, reason, f"proxy session refused at refresh: "
                                          f"workload={workload.pk} user={instance.user.username}")
            return False
        assert session is not None  # (_still_allowed refuses none)
        ProxySession.objects.filter(pk=session.pk).update(checked_at=timezone.now())
        return True


def _session_end(session: ProxySession | None, reason: str, what: str) -> None:
    """Log a refusal (`what`: which, of whom) and end the proxy session it refused, if any."""
    log.warning("%s: %s", what, reason)
    if session is not None:
        ProxySession.objects.filter(pk=session.pk).update(
            ended_at=session.ended_at or timezone.now(), ended_reason=reason[:255])


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _still_allowed(session: ProxySession | None, workload: Workload) -> str:
    """Why a proxy session must end now ("" when it may go on)."""
    if session is None:
        return "no portal session is known for it"
    if session.ended_at is not None:
        return session.ended_reason or "it was ended"
    return _refusal_for_session(workload, session.user, session.portal_session_key,
                                check_token=True)


def _refusal_for_session(workload: Workload, user: User | None, session_key: str | None, *,
                         check_token: bool = False) -> str:
    """Why `user`, signed in to the portal session `session_key`, may not open `workload` now
    ("" when they may). `check_token`: ask Keystone whether the session's token still stands."""
    if not session_key or user is None or not getattr(user, "is_authenticated", False):
        return "no portal session is known for it"
    data = SessionStore(session_key=session_key).load()
    identity = identity_store.load(data) if data else None
    if identity is None:
        return "the portal session it came from has ended"
    if data.get("_auth_user_id") not in (None, str(user.pk)):
        return "the portal session is another user's"
    if identity.expires_at <= timezone.now():
        return "the portal session's Keystone token expired"
    if check_token:
        try:
            validate_token_now(identity.unscoped.id)
        except TokenInvalid:
            return "the portal session's Keystone token was revoked"
        except KeystoneUnavailable:
            log.warning("Keystone unreachable at a proxy refresh; the session's token is "
                        "trusted until it expires")
    decision = user_decision(workload=workload, user=user, is_admin=identity.is_admin)
    return "" if decision else decision.reason


class WorkloadAuthorizationView(AuthorizationView):
    """The authorization endpoint: a workload's client admits only those the tenant's rule lets
    in. Signed-out users go to the portal's login first (LoginRequiredMixin)."""

    def get(self, request: SignedInRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = self._refusal(request)
        return refused or super().get(request, *args, **kwargs)

    def post(self, request: SignedInRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = self._refusal(request)
        return refused or super().post(request, *args, **kwargs)

    def _refusal(self, request: SignedInRequest) -> HttpResponse | None:
        mixed = _mixed_parameters(request)
        if mixed:
            log.warning("authorization request refused: user=%s: %s", request.user.username,
                        mixed)
            return render(request, "access/refused.html",
                          {"workload": None, "reason": mixed}, status=400)
        # the client the library acts on: the query's on GET, the form body's on POST
        source = request.POST if request.method == "POST" else request.GET
        workload = _workload_of(source.get("client_id") or "")
        if workload is None:
            return None  # not a workload's client: django-oauth-toolkit answers as usual
        identity = getattr(request, "identity", None)
        decision = user_decision(workload=workload, user=request.user,
                                 is_admin=bool(identity and identity.is_admin))
        if decision:
            return None
        log.warning("workload access refused: workload=%s user=%s: %s", workload.pk,
                    request.user.username, decision.reason)
        return render(request, "access/refused.html",
                      {"workload": workload, "reason": decision.reason}, status=403)

    def create_authorization_response(self, request: SignedInRequest, scopes: str,
                                      credentials: dict[str, Any], allow: bool
                                      ) -> tuple[str, dict[str, str], str | None, int]:
        if not request.session.session_key:
            request.session.save()
        credentials = {**credentials, "portal_session_key": request.session.session_key}
        # (uri, headers, body, status), as django-oauth-toolkit's core answers
        response: tuple[str, dict[str, str], str | None, int] = \
            super().create_authorization_response(request, scopes, credentials, allow)
        return response


# the authorization request's parameters (those AllowForm carries, and oauthlib's own)
AUTHORIZATION_PARAMETERS = ("client_id", "redirect_uri", "response_type", "state", "scope",
                            "nonce", "code_challenge", "code_challenge_method", "claims",
                            "prompt", "response_mode", "request", "request_uri")


def _mixed_parameters(request: SignedInRequest) -> str:
    """Why an authorization request is ambiguous ("" when it is not): a parameter given twice,
    or, on a POST, given in the query as well as the body with another value (the library acts
    on the body's, so a check of the query's would be a check of the wrong client)."""
    for name in AUTHORIZATION_PARAMETERS:
        in_query = request.GET.getlist(name)
        in_body = request.POST.getlist(name) if request.method == "POST" else []
        if len(in_query) > 1 or len(in_body) > 1:
            return f"The parameter {name} is given more than once."
        if in_query and in_body and in_query != in_body:
            return (f"The parameter {name} differs between the address and the form; "
                    "the request is refused.")
    return ""


__all__ = ["Application", "PortalOAuth2Validator", "WorkloadAuthorizationView"]
