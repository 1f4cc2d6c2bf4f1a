"""The signed-in user's Keystone identity, kept in the server-side session.

The browser holds only the session id (HttpOnly cookie); the Keystone tokens live in the
session store on the server. Like Horizon, the portal keeps the user's unscoped token and
exchanges it for a project-scoped token whenever the user switches project.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.contrib.sessions.backends.base import SessionBase

from .client import Project, Token
from .roles import PortalRole, effective_role, project_role

SESSION_KEY = "keystone"


@dataclasses.dataclass
class Identity:
    unscoped: Token
    projects: list[Project]
    scoped: Token | None  # the token for the current project; None when the user has no project
    is_admin: bool
    validated_at: dt.datetime

    # --- derived -------------------------------------------------------------------------
    @property
    def project(self) -> Project | None:
        if self.scoped is None:
            return None
        return next((p for p in self.projects if p.id == self.scoped.project_id), None)

    @property
    def role(self) -> PortalRole | None:
        """The user's portal role in the current project."""
        own = project_role(self.scoped.roles) if self.scoped else None
        return effective_role(own, portal_admin=self.is_admin)

    @property
    def expires_at(self) -> dt.datetime:
        return min(t.expires_at for t in (self.unscoped, self.scoped) if t is not None)

    def has_project(self, project_id: str) -> bool:
        return any(p.id == project_id for p in self.projects)

    # --- session (de)serialisation -----------------------------------------------------
    def to_session(self) -> dict[str, Any]:
        return {
            "unscoped": self.unscoped.to_dict(),
            "projects": [dataclasses.asdict(p) for p in self.projects],
            "scoped": self.scoped.to_dict() if self.scoped else None,
            "is_admin": self.is_admin,
            "validated_at": self.validated_at.isoformat(),
        }

    @classmethod
    def from_session(cls, data: dict[str, Any]) -> Identity:
        return cls(
            unscoped=Token.from_dict(data["unscoped"]),
            projects=[Project(**p) for p in data["projects"]],
            scoped=Token.from_dict(data["scoped"]) if data.get("scoped") else None,
            is_admin=bool(data.get("is_admin")),
            validated_at=dt.datetime.fromisoformat(data["validated_at"]),
        )


def load(session: SessionBase | Mapping[str, Any]) -> Identity | None:
    """The identity kept in a session (or in a session's decoded data), None if none."""
    data = session.get(SESSION_KEY)
    if not data:
        return None
    try:
        return Identity.from_session(data)
    except (KeyError, TypeError, ValueError):
        return None


def store(session: SessionBase, identity: Identity) -> None:
    session[SESSION_KEY] = identity.to_session()
