"""A user's own notifications: nobody else reads them, admins included (identity/scoping.py's
tenant rule does not apply: a notification is addressed to one person, whatever the project)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self, TypeVar

from django.db import models

if TYPE_CHECKING:
    # the type arguments below, written as strings: models.py imports this module
    from identity.identity import Identity

    from .models import Delivery, Notification, NotificationPreference, Webhook  # noqa: F401

_M = TypeVar("_M", bound=models.Model)


class PersonalQuerySet(models.QuerySet[_M]):
    """Rows addressed to one user (`user`): `restrict(identity)` keeps the caller's own."""

    def restrict(self, identity: Identity | None, action: object = None) -> Self:
        user_id = getattr(getattr(identity, "unscoped", None), "user_id", None)
        if not user_id:
            return self.none()
        return self.filter(user__keystone_user_id=user_id)


class NotificationQuerySet(PersonalQuerySet["Notification"]):
    def unread(self) -> Self:
        return self.filter(read_at__isnull=True)


class PreferenceQuerySet(PersonalQuerySet["NotificationPreference"]):
    pass


def _webhooks_of(identity: Identity | None, via: str = "") -> models.Q | None:
    """The webhooks `identity` reaches (`via`: the path to them, e.g. "webhook__"): their own;
    their current project's; every project's for a portal admin (who may have to confirm a
    webhook whose project has no manager left)."""
    user_id = getattr(getattr(identity, "unscoped", None), "user_id", None)
    if not user_id:
        return None
    mine = models.Q(**{f"{via}user__keystone_user_id": user_id})
    project_id = getattr(getattr(identity, "scoped", None), "project_id", None)
    if getattr(identity, "is_admin", False):
        mine |= models.Q(**{f"{via}tenant__isnull": False})
    elif project_id:
        mine |= models.Q(**{f"{via}tenant__keystone_project_id": project_id})
    return mine


class WebhookQuerySet(models.QuerySet["Webhook"]):
    """A webhook is a user's (theirs alone) or a project's (its people see that it exists; its
    managers and admins manage it: webhook_manageable)."""

    def restrict(self, identity: Identity | None, action: object = None) -> Self:
        mine = _webhooks_of(identity)
        return self.none() if mine is None else self.filter(mine)


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    """A webhook's delivery is seen where its webhook is (webhook_manageable decides who reads
    it); an e-mail's, by nobody through this."""

    def restrict(self, identity: Identity | None, action: object = None) -> Self:
        mine = _webhooks_of(identity, via="webhook__")
        return self.none() if mine is None else self.filter(mine, webhook__isnull=False)
