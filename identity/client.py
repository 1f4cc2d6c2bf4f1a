"""Talking to Keystone through keystoneauth1. Nothing else in the portal speaks to Keystone.

Errors are turned into three exceptions the callers act on:
- `CredentialsRejected`: Keystone answered and said no (wrong password, disabled user, …);
- `TokenInvalid`: a token is expired, revoked or not a token at all;
- `KeystoneUnavailable`: Keystone could not be reached or answered with a server error.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any, TypeVar

from django.conf import settings
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.access import access as ks_access
from keystoneauth1.identity import base as ks_base
from keystoneauth1.identity import v3

log = logging.getLogger(__name__)


class KeystoneError(Exception):
    """Base of the errors callers handle."""


class CredentialsRejected(KeystoneError):
    """Keystone refused the credentials (it does not say which part was wrong, nor do we)."""


class TokenInvalid(KeystoneError):
    """The token is expired, revoked or unknown."""


class KeystoneUnavailable(KeystoneError):
    """Keystone could not be reached, timed out, or failed on its side."""


@dataclasses.dataclass(frozen=True)
class Project:
    id: str
    name: str
    domain_id: str
    enabled: bool = True


_T = TypeVar("_T")


def _carried(value: _T | None, what: str) -> _T:
    """A field that every Keystone v3 token carries (keystoneauth1 types them all optional)."""
    if value is None:
        raise KeystoneUnavailable(f"Keystone answered with a token without its {what}")
    return value


@dataclasses.dataclass(frozen=True)
class Token:
    """What the portal keeps of a Keystone token. Its id is a credential: left out of the repr
    (error reports and log lines show the rest)."""

    id: str = dataclasses.field(repr=False)
    expires_at: dt.datetime
    user_id: str
    user_name: str
    user_domain_id: str
    user_domain_name: str
    project_id: str | None = None
    project_name: str | None = None
    project_domain_id: str | None = None
    roles: tuple[str, ...] = ()
    system_scoped: bool = False

    @classmethod
    def from_access(cls, access: ks_access.AccessInfo) -> Token:
        return cls(
            id=_carried(access.auth_token, "id"),
            expires_at=_carried(access.expires, "expiry"),
            user_id=_carried(access.user_id, "user id"),
            user_name=_carried(access.username, "user name"),
            user_domain_id=_carried(access.user_domain_id, "user domain id"),
            user_domain_name=_carried(access.user_domain_name, "user domain name"),
            project_id=access.project_id,
            project_name=access.project_name,
            project_domain_id=access.project_domain_id,
            roles=tuple(access.role_names or ()),
            system_scoped=bool(access.system_scoped),
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["expires_at"] = self.expires_at.isoformat()
        data["roles"] = list(self.roles)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Token:
        values = dict(data)
        values["expires_at"] = dt.datetime.fromisoformat(values["expires_at"])
        values["roles"] = tuple(values.get("roles", ()))
        return cls(**values)

    def is_expired(self, now: dt.datetime | None = None) -> bool:
        now = now or dt.datetime.now(dt.UTC)
        return self.expires_at <= now


def _translate(exc: Exception) -> KeystoneError:
    """Map keystoneauth1's exception zoo onto the three cases the portal distinguishes."""
    if isinstance(exc, ks_exc.ConnectionError | ks_exc.DiscoveryFailure | ks_exc.RequestTimeout):
        return KeystoneUnavailable(str(exc))
    if isinstance(exc, ks_exc.HttpError) and (exc.http_status or 0) >= 500:
        return KeystoneUnavailable(f"Keystone answered {exc.http_status}")
    if isinstance(exc, ks_exc.NotFound):
        return TokenInvalid(str(exc))
    if isinstance(exc, ks_exc.Unauthorized | ks_exc.Forbidden | ks_exc.AuthorizationFailure):
        return CredentialsRejected(str(exc))
    return KeystoneUnavailable(str(exc))


class KeystoneClient:
    """The identity operations the portal needs, each a single Keystone conversation."""

    def __init__(self, url: str | None = None, *, timeout: float | None = None) -> None:
        self.url = (url or settings.KEYSTONE_URL).rstrip("/")
        self.timeout = timeout if timeout is not None else settings.KEYSTONE_TIMEOUT

    def _session(self, auth: ks_base.BaseIdentityPlugin | None = None) -> ks_session.Session:
        return ks_session.Session(auth=auth, timeout=self.timeout)

    def _access(self, auth: ks_base.BaseIdentityPlugin) -> ks_access.AccessInfo:
        try:
            return auth.get_access(self._session(auth))
        except ks_exc.ClientException as exc:
            raise _translate(exc) from exc

    # --- authentication -------------------------------------------------------------------
    def authenticate(self, username: str, password: str, domain: str) -> Token:
        """An unscoped token for a user name and password in a domain (by name or id)."""
        by_id = domain == "default"
        auth = v3.Password(
            auth_url=self.url, username=username, password=password, unscoped=True,
            user_domain_id=domain if by_id else None, user_domain_name=None if by_id else domain,
        )
        return Token.from_access(self._access(auth))

    def scope_to_project(self, token_id: str, project_id: str) -> Token:
        """Exchange a token (unscoped or scoped) for one scoped to `project_id`."""
        auth = v3.Token(auth_url=self.url, token=token_id, project_id=project_id)
        return Token.from_access(self._access(auth))

    def user_projects(self, token_id: str) -> list[Project]:
        """The projects a token's user may scope to (`GET /v3/auth/projects`)."""
        body = self._get("/auth/projects", token_id)
        return sorted(
            (
                Project(id=p["id"], name=p["name"], domain_id=p.get("domain_id", "default"),
                        enabled=p.get("enabled", True))
                for p in body.get("projects", [])
                if p.get("enabled", True)
            ),
            key=lambda p: p.name.lower(),
        )

    # --- token lifecycle -----------------------------------------------------------------
    def validate(self, subject_token: str, *, auth_token: str | None = None) -> Token:
        """Ask Keystone whether `subject_token` is valid now, and what it carries.

        `auth_token` is the caller's own token: the portal's service token, or the subject token
        itself (Keystone lets a token's owner validate it). Revoked or unknown → TokenInvalid.
        """
        headers = {"X-Auth-Token": auth_token or subject_token, "X-Subject-Token": subject_token}
        try:
            resp = self._session().get(f"{self.url}/auth/tokens", headers=headers)
        except ks_exc.ClientException as exc:
            error = _translate(exc)
            if isinstance(error, CredentialsRejected) and auth_token in (None, subject_token):
                # validating a token with itself: a 401 means the token itself is dead
                raise TokenInvalid(str(exc)) from exc
            raise error from exc
        access = ks_access.create(resp=resp, body=resp.json())
        token = Token.from_access(access)
        return dataclasses.replace(token, id=subject_token)

    def revoke(self, token_id: str) -> None:
        """Revoke a token (logout). Already invalid is fine."""
        headers = {"X-Auth-Token": token_id, "X-Subject-Token": token_id}
        try:
            self._session().delete(f"{self.url}/auth/tokens", headers=headers)
        except ks_exc.NotFound:
            return
        except ks_exc.Unauthorized:
            return
        except ks_exc.ClientException as exc:
            raise _translate(exc) from exc

    def _get(self, path: str, token_id: str) -> dict[str, Any]:
        try:
            resp = self._session().get(f"{self.url}{path}", headers={"X-Auth-Token": token_id})
        except ks_exc.ClientException as exc:
            error = _translate(exc)
            if isinstance(error, CredentialsRejected):
                raise TokenInvalid(str(exc)) from exc
            raise error from exc
        body: dict[str, Any] = resp.json()
        return body

    def service_token(self) -> Token:
        """A token of the portal's own service identity, for validating callers' tokens."""
        auth = v3.Password(
            auth_url=self.url,
            username=settings.KEYSTONE_SERVICE_USER,
            password=settings.KEYSTONE_SERVICE_PASSWORD,
            user_domain_name=settings.KEYSTONE_SERVICE_DOMAIN,
            project_name=settings.KEYSTONE_SERVICE_PROJECT,
            project_domain_name=settings.KEYSTONE_SERVICE_DOMAIN,
        )
        return Token.from_access(self._access(auth))

    def service_system_token(self) -> Token:
        """A system-scoped token of the portal's service identity (needs `reader` on the
        system): lists every project and its members, for the tenant sync and admin pages."""
        auth = v3.Password(
            auth_url=self.url,
            username=settings.KEYSTONE_SERVICE_USER,
            password=settings.KEYSTONE_SERVICE_PASSWORD,
            user_domain_name=settings.KEYSTONE_SERVICE_DOMAIN,
            system_scope="all",
        )
        return Token.from_access(self._access(auth))

    def all_projects(self, token_id: str) -> list[Project]:
        """Every project (`GET /v3/projects`), for a token allowed to list them."""
        body = self._get("/projects", token_id)
        return [Project(id=p["id"], name=p["name"], domain_id=p.get("domain_id", "default"),
                        enabled=p.get("enabled", True)) for p in body.get("projects", [])]

    def project_members(self, token_id: str, project_id: str) -> list[dict[str, str]]:
        """Who holds which role on a project, with names (effective: group and implied roles
        expanded), sorted by user then role."""
        body = self._get(f"/role_assignments?scope.project.id={project_id}"
                         "&include_names=true&effective=true", token_id)
        members = {
            (a["user"]["name"], a["role"]["name"]): {
                "user_id": a["user"]["id"], "user": a["user"]["name"], "role": a["role"]["name"]}
            for a in body.get("role_assignments", []) if "user" in a
        }
        return [members[key] for key in sorted(members)]

    def user_project_roles(self, token_id: str, user_id: str, project_id: str) -> list[str]:
        """The roles a user holds on a project now (effective: through groups and implied
        roles), by name; [] when none."""
        body = self._get(f"/role_assignments?user.id={user_id}&scope.project.id={project_id}"
                         "&include_names=true&effective=true", token_id)
        return sorted({a["role"]["name"] for a in body.get("role_assignments", [])
                       if "role" in a})

    def check_reachable(self) -> None:
        """Raise KeystoneUnavailable unless Keystone answers its version document."""
        try:
            self._session().get(self.url, authenticated=False)
        except ks_exc.ClientException as exc:
            raise _translate(exc) from exc
