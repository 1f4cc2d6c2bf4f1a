"""Django authentication backend: the password goes to Keystone, never into the database."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest

from .client import CredentialsRejected, KeystoneClient
from .models import User
from .services import identity_start, user_sync

LOGIN_IDENTITY_ATTR = "_keystone_identity"


class KeystoneBackend:
    """Authenticate a user name, password and domain against Keystone.

    On success the new session identity (tokens, projects, admin flag) is left on the request
    for the login view, which stores it after `login()` has cycled the session id. Wrong
    credentials return None (Django then signals a failed login, which django-axes counts); an
    unreachable Keystone raises `KeystoneUnavailable`, for the view to report as such.
    """

    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, domain: str | None = None,
                     **kwargs: object) -> User | None:
        if not username or not password:
            return None
        client = KeystoneClient()
        try:
            token = client.authenticate(username, password, domain or settings.KEYSTONE_DEFAULT_DOMAIN)
        except CredentialsRejected:
            return None
        known = get_user_model().objects.filter(keystone_user_id=token.user_id).first()
        identity = identity_start(unscoped=token, client=client,
                                  preferred_project_id=known.last_project_id if known else None)
        user = user_sync(token=token, is_admin=identity.is_admin)
        if request is not None:
            setattr(request, LOGIN_IDENTITY_ATTR, identity)
        return user

    def get_user(self, user_id: int) -> User | None:
        return get_user_model().objects.filter(pk=user_id, is_active=True).first()
