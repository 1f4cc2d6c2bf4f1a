"""The local mirror of a Keystone user. Keystone owns the identity; no password is stored."""

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """A Keystone user as the portal has seen them.

    `username` holds the Keystone user name (unique only together with the domain in Keystone,
    so the portal keys users on `keystone_user_id`). The password is always unusable: logins go
    to Keystone.
    """

    keystone_user_id = models.CharField(max_length=64, unique=True, null=True, blank=True)
    domain_id = models.CharField(max_length=64, default="default")
    domain_name = models.CharField(max_length=255, default="Default")
    # the project the user last worked in: the next login starts there
    last_project_id = models.CharField(max_length=64, blank=True, default="")

    # Keystone allows the same user name in two domains; the portal's `username` column must
    # stay unique, so users outside the default domain get `name@domain`.
    USERNAME_FIELD = "username"

    class Meta:
        db_table = "portal_user"

    def __str__(self) -> str:
        return self.username
