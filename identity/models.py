"""The local mirror of a Keystone user. Keystone owns the identity; no password is stored."""

from django.contrib.auth.models import AbstractUser
from django.db import models

DEFAULT_DOMAIN_ID = "default"


class User(AbstractUser):
    """A Keystone user as the portal has seen them, keyed by their Keystone user id.

    Keystone names a user uniquely only inside a domain, and a name may be anything (`victim@D`
    in one domain reads like `victim` of domain `D`), so no name keys anything here: Django's
    unique `username` (USERNAME_FIELD, what sessions, the auth backend and `createsuperuser`
    rely on) holds the Keystone user id, which is unique across domains and never reused, and
    everything kept per user (budget caps, SSH principals, usage, audit actors) follows it.
    `keystone_user_id` holds the same id (null only for a local row that no Keystone user
    made). `name` and the domain are for people to read: `label` is what pages, API answers,
    notices and the audit trail show. The password is always unusable: logins go to Keystone.
    """

    keystone_user_id = models.CharField(max_length=64, unique=True, null=True, blank=True)
    # the Keystone user name: display only (unique in Keystone only together with the domain)
    name = models.CharField(max_length=255, blank=True, default="")
    domain_id = models.CharField(max_length=64, default=DEFAULT_DOMAIN_ID)
    domain_name = models.CharField(max_length=255, default="Default")
    # the project the user last worked in: the next login starts there
    last_project_id = models.CharField(max_length=64, blank=True, default="")

    USERNAME_FIELD = "username"

    class Meta:
        db_table = "portal_user"

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """The user as people read them: the Keystone name, with the domain in brackets when
        the user is outside the default domain, or when the name itself has a bracket (so
        that `victim (D)` of Default never reads like `victim` of domain D)."""
        return user_label(self.name or self.username, self.domain_id, self.domain_name)


def user_label(name: str, domain_id: str, domain_name: str) -> str:
    """`User.label` of these values (for reports that read them as columns)."""
    if domain_id != DEFAULT_DOMAIN_ID or "(" in name:
        return f"{name} ({domain_name})"
    return name
