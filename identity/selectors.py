"""Reads of the identity domain: the users of a project, and a user as people write them (a
Keystone user id, or a name) resolved to the one user it means."""

from __future__ import annotations

import re

from django.db.models import Q, QuerySet

from .assignments import project_user_ids
from .models import User

# a label as models.User.label writes it: "name (domain)"
_LABEL = re.compile(r"^(?P<name>.*) \((?P<domain>[^()]*)\)$", re.DOTALL)


class UserRefused(ValueError):
    """The text names none of the users it may mean, or several; the message says which."""


class UserAmbiguous(UserRefused):
    """The text is a name that several of the users it may mean share."""


def project_users(project_id: str, *, fresh: bool = False) -> QuerySet[User]:
    """The users the portal has seen who hold a role on the project now (Keystone asked, the
    answer cached briefly unless `fresh`; KeystoneUnavailable when it cannot be)."""
    return User.objects.filter(keystone_user_id__in=project_user_ids(project_id, fresh=fresh))


def user_resolve(text: str, *, among: QuerySet[User], where: str = "here") -> User:
    """The one user of `among` that `text` means: their Keystone user id, or, for convenience,
    a name (or a label, "name (domain)") that only one of them has. UserRefused otherwise,
    naming `text`; UserAmbiguous when several share the name, naming each with its domain and
    id."""
    text = text.strip()
    found = list(among.filter(username=text)) if text else []
    if not found and text:
        named = Q(name__iexact=text)
        label = _LABEL.match(text)
        if label:
            named |= Q(name__iexact=label["name"], domain_name__iexact=label["domain"])
        found = list(among.filter(named).order_by("pk"))
    if not found:
        raise UserRefused(f"{text!r} is no user {where}.")
    if len(found) > 1:
        who = "; ".join(f"{user.name or user.username} of domain {user.domain_name}: id "
                        f"{user.username}" for user in found)
        raise UserAmbiguous(f"{text!r} is the name of {len(found)} users {where} ({who}); give "
                          "the user id.")
    return found[0]


def site_admins() -> QuerySet[User]:
    """The site's admins as the portal last saw them: active users whose latest sign-in held the
    admin role (identity.services.user_sync keeps the flag)."""
    return User.objects.filter(is_superuser=True, is_active=True)
