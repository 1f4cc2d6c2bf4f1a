"""A tenant is a Keystone project the portal has seen, with its Kubernetes namespace."""

from django.db import models


class Tenant(models.Model):
    class State(models.TextChoices):
        NEW = "new", "new"  # seen, namespace not provisioned yet
        PROVISIONED = "provisioned", "provisioned"
        DRIFTED = "drifted", "drifted"
        FAILED = "failed", "failed"
        DELETING = "deleting", "deleting"

    keystone_project_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255)
    domain_id = models.CharField(max_length=64, default="default")
    namespace = models.CharField(max_length=63, unique=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    state_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
