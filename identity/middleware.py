"""Keeps a signed-in user's Keystone identity honest on every request.

A session ends when its Keystone token expires, or when Keystone says the token was revoked.
Keystone is asked at most once per KEYSTONE_TOKEN_CACHE_TTL seconds per session; while it is
unreachable the user keeps working until their token's own expiry.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponseBase

from . import identity as identity_store
from .access import PortalRequest
from .client import KeystoneClient, KeystoneUnavailable, TokenInvalid

log = logging.getLogger(__name__)

EXPIRED_MESSAGE = "Your Keystone session has expired. Please log in again."
REVOKED_MESSAGE = "Your Keystone token is no longer valid (it was revoked). Please log in again."


class KeystoneSessionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: PortalRequest) -> HttpResponseBase:
        request.identity = None
        if request.user.is_authenticated:
            self._attach(request)
        return self.get_response(request)

    def _attach(self, request: PortalRequest) -> None:
        identity = identity_store.load(request.session)
        if identity is None:
            # a session without Keystone tokens (e.g. from before an upgrade): start over
            logout(request)
            return
        now = dt.datetime.now(dt.UTC)
        if identity.expires_at <= now:
            self._end(request, EXPIRED_MESSAGE)
            return
        if (now - identity.validated_at).total_seconds() >= settings.KEYSTONE_TOKEN_CACHE_TTL:
            token = identity.scoped or identity.unscoped
            try:
                KeystoneClient().validate(token.id)
            except TokenInvalid:
                self._end(request, REVOKED_MESSAGE)
                return
            except KeystoneUnavailable:
                log.warning("Keystone unreachable; trusting the session token until it expires")
            identity.validated_at = now
            identity_store.store(request.session, identity)
        request.identity = identity

    @staticmethod
    def _end(request: HttpRequest, message: str) -> None:
        logout(request)
        if not request.path.startswith("/api/"):
            messages.warning(request, message)
