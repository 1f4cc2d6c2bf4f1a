"""The audit trail: who changed what, when, in which tenant, before → after.

The table keeps its first name (tenants_auditrecord): the model moved here from tenants without
moving data (migrations 0001 here, tenants 0006).
"""

from django.conf import settings
from django.db import models

from .querysets import AuditRecordQuerySet


class AuditRecord(models.Model):
    """Who changed what, when, in which tenant: before → after. Written by services only."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    # who, as the record was written: the Keystone user id (what the actor is: it outlives the
    # user's row and a rename) and the name shown (models.User.label), or 'system'
    actor_user_id = models.CharField(max_length=150, blank=True, default="", db_index=True)
    actor_name = models.CharField(max_length=255, help_text="user name, or 'system'")
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="audit_records")
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=255, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        db_table = "tenants_auditrecord"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["tenant", "-at"], name="tenants_aud_tenant__05eae7_idx")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target}"
