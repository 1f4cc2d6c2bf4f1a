"""A project's and its people's secrets, as the portal records them: names, never values.

A Secret row says what a secret is called, whose it is (a user's own, or the project's), of
which kind, and the names of its keys. Its value lives in one place only: the Kubernetes
Secret `object_name` in the project's namespace, written by services.py within the request
that gave it (docs/security.md says why, and where a value never goes)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .querysets import SecretQuerySet


class Secret(models.Model):
    class Kind(models.TextChoices):
        ENV = "env", "environment variables"
        FILE = "file", "files"
        REGISTRY = "registry", "registry login"
        S3 = "s3", "S3 credentials"

    class Scope(models.TextChoices):
        USER = "user", "mine"
        PROJECT = "project", "the project's"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE,
                               related_name="secrets")
    # its maker; for a user secret, the one person who sees and uses it
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="secrets")
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    scope = models.CharField(max_length=8, choices=Scope.choices)
    # the names of what the secret holds (variables, files, registry/S3 fields), sorted
    keys = models.JSONField(default=list, blank=True)
    # the Kubernetes Secret in the tenant's namespace that holds the value
    object_name = models.CharField(max_length=63, blank=True)
    # when the portal found its Kubernetes Secret gone (the namespace was deleted and made
    # again, or someone deleted the object): the value is nowhere else, so the secret needs a
    # new one (replace) before a launch may use it again; None while it is there
    lost_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SecretQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], condition=Q(scope="project"),
                                    name="credentials_secret_project_name"),
            models.UniqueConstraint(fields=["tenant", "owner", "name"], condition=Q(scope="user"),
                                    name="credentials_secret_user_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def state(self) -> str:
        """"ok", or "lost": its value is gone from the cluster and must be given again."""
        return "lost" if self.lost_at is not None else "ok"
