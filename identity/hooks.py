"""What the identity layer tells the apps above it, which it may not import (they import it): a
hook of core.registry.

PROJECTS_SEEN: called with the Keystone projects a user was just seen with: at login
(identity_start, every project of theirs) and for an API caller's token (its project). tenants
registers `tenants_ensure_for_projects`: every Keystone project gets its tenant on first sight.
"""

from __future__ import annotations

from typing import Protocol

from core.registry import Hook

from .client import Project


class ProjectsSeen(Protocol):
    def __call__(self, *, projects: list[Project]) -> None: ...


PROJECTS_SEEN = Hook[ProjectsSeen]("identity.projects_seen", order=("tenants",))


def projects_seen(projects: list[Project]) -> None:
    """Tell every entry of PROJECTS_SEEN, in its order."""
    for entry in PROJECTS_SEEN:
        entry(projects=projects)
