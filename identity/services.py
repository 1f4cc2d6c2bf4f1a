"""Writes of the identity domain: sign in, switch project, sign out, mirror the user."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest

from . import identity as identity_store
from .client import KeystoneClient, KeystoneError, KeystoneUnavailable, Project, Token
from .hooks import projects_seen
from .identity import Identity
from .models import User
from .roles import is_portal_admin

log = logging.getLogger(__name__)

def user_sync(*, token: Token, is_admin: bool | None = None) -> User:
    """Create or update the local mirror of the Keystone user behind `token`, found by the
    Keystone user id (its `username`: see models.User). A rename in Keystone, or a user of
    another domain with the same name, touches no other row."""
    users = get_user_model()
    # Every API request comes through here: when the mirror is already up to date (nearly
    # always), one read answers, with no row lock, no transaction and no write.
    wanted = {"username": token.user_id, "name": token.user_name,
              "domain_id": token.user_domain_id, "domain_name": token.user_domain_name,
              "is_active": True}
    if is_admin is not None:
        wanted.update(is_staff=is_admin, is_superuser=is_admin)
    user = users.objects.filter(keystone_user_id=token.user_id).first()
    if user is not None and all(getattr(user, field) == value for field, value in wanted.items()):
        return user
    with transaction.atomic():
        user = users.objects.select_for_update().filter(keystone_user_id=token.user_id).first()
        if user is None:
            user = users(keystone_user_id=token.user_id)
            user.set_unusable_password()
        for field, value in wanted.items():
            setattr(user, field, value)
        user.save()
    return user


def _admin_check(client: KeystoneClient, unscoped: Token, projects: list[Project]) -> Token | None:
    """The admin project's token when the user holds the admin role there, else None."""
    admin_project = next((p for p in projects if p.name == settings.KEYSTONE_ADMIN_PROJECT), None)
    if admin_project is None:
        return None
    scoped = client.scope_to_project(unscoped.id, admin_project.id)
    if is_portal_admin(project_name=scoped.project_name, role_names=scoped.roles, system_scoped=False):
        return scoped
    return None


def identity_start(*, unscoped: Token, preferred_project_id: str | None = None,
                   client: KeystoneClient | None = None) -> Identity:
    """Everything the portal needs to know about a user right after Keystone accepted them.

    Reads their projects, records each as a tenant, decides whether they are a portal admin and
    scopes a token to their first (or last used) project.
    """
    client = client or KeystoneClient()
    projects = client.user_projects(unscoped.id)
    projects_seen(projects)  # tenants records each as a tenant
    admin_token = _admin_check(client, unscoped, projects)
    scoped = None
    if projects:
        ids = [p.id for p in projects]
        first = preferred_project_id if preferred_project_id in ids else ids[0]
        if admin_token is not None and admin_token.project_id == first:
            scoped = admin_token
        else:
            scoped = client.scope_to_project(unscoped.id, first)
    return Identity(
        unscoped=unscoped,
        projects=projects,
        scoped=scoped,
        is_admin=admin_token is not None,
        validated_at=dt.datetime.now(dt.UTC),
    )


def identity_switch_project(*, identity: Identity, project_id: str,
                            client: KeystoneClient | None = None) -> Identity:
    """Scope a new token to another of the user's projects, as Horizon's switcher does.

    The previous project token is revoked: a user holds one project token at a time.
    """
    if not identity.has_project(project_id):
        raise PermissionError("not one of your projects")
    client = client or KeystoneClient()
    scoped = client.scope_to_project(identity.unscoped.id, project_id)
    previous = identity.scoped
    identity.scoped = scoped
    identity.validated_at = dt.datetime.now(dt.UTC)
    if previous is not None and previous.id != scoped.id:
        _revoke_quietly(client, previous.id)
    return identity


def identity_end(*, identity: Identity, client: KeystoneClient | None = None) -> None:
    """Revoke the user's tokens in Keystone (logout). An unreachable Keystone is logged."""
    client = client or KeystoneClient()
    for token in (identity.scoped, identity.unscoped):
        if token is not None:
            _revoke_quietly(client, token.id)


def _revoke_quietly(client: KeystoneClient, token_id: str) -> None:
    try:
        client.revoke(token_id)
    except KeystoneUnavailable:
        log.warning("could not revoke a token: Keystone unreachable")
    except KeystoneError as exc:
        log.info("token revocation refused: %s", exc)


def session_store(request: HttpRequest, identity: Identity) -> None:
    """Keep the identity in the server-side session; remember the project for the next login."""
    identity_store.store(request.session, identity)
    if identity.scoped is not None and request.user.is_authenticated:
        get_user_model().objects.filter(pk=request.user.pk).update(
            last_project_id=identity.scoped.project_id
        )
