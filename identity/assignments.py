"""What role a user holds on a project now, asked of Keystone with the portal's system-scoped
service token (not the user's own token, which may be long gone): the authenticating proxies'
re-checks (access) use it, so that a user removed from a project is out within a minute.

Answers are cached for ASSIGNMENT_CACHE_SECONDS, so many sessions of one user cost Keystone one
question per interval.
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache

from .client import CredentialsRejected, KeystoneClient, TokenInvalid
from .roles import PortalRole, project_role
from .tokens import ServiceToken

ASSIGNMENT_CACHE_SECONDS = 15

SYSTEM_TOKEN = ServiceToken(KeystoneClient.service_system_token)


def project_role_now(user_id: str, project_id: str, *,
                     client: KeystoneClient | None = None) -> PortalRole | None:
    """The user's portal role on the project (None: no role there). Raises
    KeystoneUnavailable when Keystone cannot be asked and nothing recent is cached."""
    key = "ks-roles:" + hashlib.sha256(f"{user_id}\0{project_id}".encode()).hexdigest()
    try:
        roles = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an optimisation
        roles = None
    if roles is None:
        client = client or KeystoneClient()
        try:
            roles = client.user_project_roles(SYSTEM_TOKEN.id(client), user_id, project_id)
        except (CredentialsRejected, TokenInvalid):
            roles = client.user_project_roles(SYSTEM_TOKEN.id(client, refresh=True), user_id,
                                              project_id)
        try:
            cache.set(key, roles, ASSIGNMENT_CACHE_SECONDS)
        except Exception:  # noqa: BLE001
            pass
    return project_role(roles)


def project_user_ids(project_id: str, *, fresh: bool = False,
                     client: KeystoneClient | None = None) -> set[str]:
    """The Keystone ids of everyone holding a role on the project now (through groups too),
    cached like `project_role_now` (`fresh`: Keystone asked again). Raises
    KeystoneUnavailable when Keystone cannot be asked and nothing recent is cached."""
    key = "ks-members:" + hashlib.sha256(project_id.encode()).hexdigest()
    try:
        ids = None if fresh else cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an optimisation
        ids = None
    if ids is None:
        client = client or KeystoneClient()
        try:
            members = client.project_members(SYSTEM_TOKEN.id(client), project_id)
        except (CredentialsRejected, TokenInvalid):
            members = client.project_members(SYSTEM_TOKEN.id(client, refresh=True), project_id)
        ids = sorted({member["user_id"] for member in members})
        try:
            cache.set(key, ids, ASSIGNMENT_CACHE_SECONDS)
        except Exception:  # noqa: BLE001
            pass
    return set(ids)
