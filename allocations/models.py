"""What a university site keeps about a project beyond its quota: who leads it, what pays for
it, its field, and until when its allocation runs.

- ProjectRecord: one per tenant (none: nothing recorded, no end). `allocation_ends` is the
  last day the allocation runs; from the next day the project is held: no new launches
  (allocations.admission), running work untouched, until an admin or a department admin sets
  a later end. The notices of a coming end and of the hold are sent once per end date
  (`ending_told_for`, `ended_told_for`).
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models

from .querysets import ProjectRecordQuerySet, ResourceRequestQuerySet


class ProjectRecord(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE,
                                  related_name="record")
    principal_investigator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+")
    grants = models.JSONField(default=list, blank=True,
                              help_text="grant numbers or cost centres that pay for it")
    research_field = models.CharField(max_length=100, blank=True, default="")
    allocation_ends = models.DateField(null=True, blank=True,
                                       help_text="the last day; null: no end")
    ending_told_for = models.DateField(null=True, blank=True)
    ended_told_for = models.DateField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProjectRecordQuerySet.as_manager()

    def __str__(self) -> str:
        return f"record of {self.tenant_id}"

    def ended(self, today: dt.date) -> bool:
        """Whether the allocation is past its last day on `today` (held)."""
        return self.allocation_ends is not None and today > self.allocation_ends


class ResourceRequest(models.Model):
    """A project's ask for more: quota of a GPU type, a bigger budget, a reservation beyond
    its allowance, a larger allowance, or its allocation renewed. Admins and the admins of the
    project's department approve (the change applied through the same services an admin's edit
    uses, `applied` keeping before → after) or deny it, with a note. With `ends_at` an approved
    quota, budget or allowance is a temporary grant: the beat takes it back at that time."""

    class Kind(models.TextChoices):
        QUOTA = "quota", "more GPUs of a type"
        BUDGET = "budget", "a bigger GPU-hour budget"
        RESERVATION = "reservation", "a reservation beyond the allowance"
        ALLOWANCE = "allowance", "a larger reservation allowance"
        RENEWAL = "renewal", "the allocation renewed"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        DENIED = "denied", "denied"
        ENDED = "ended", "ended (a temporary grant taken back)"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE,
                               related_name="resource_requests")
    asker = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                              related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    details = models.JSONField(default=dict)
    justification = models.TextField()
    ends_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    note = models.TextField(blank=True, default="")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    applied = models.JSONField(null=True, blank=True,
                               help_text="what approving changed: before → after")
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResourceRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["state", "ends_at"])]

    def __str__(self) -> str:
        return f"request {self.pk} ({self.kind}) of {self.tenant_id}"
