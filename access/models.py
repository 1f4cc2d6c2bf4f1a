"""Who may reach a tenant's service workloads: `TenantServiceAccess`, the tenant's rule (owner
only / members / readers), whether an admin lets it open workloads to anyone and whether its
users may SSH into them.

The records of each workload (its OAuth client, its proxy's sessions, its SSH certificates and
sessions) hold keys to the workload and live beside it, in workloads/models.py: this app sits
below workloads, which reads the rule and the proxy's configuration from here.
"""

from __future__ import annotations

from django.db import models

from .querysets import TenantServiceAccessQuerySet


class ServiceAccess(models.TextChoices):
    OWNER = "owner", "the owner, the project's managers and admins"
    MEMBERS = "members", "members of the project (and managers, admins)"
    READERS = "readers", "everyone with a role in the project, readers included"


class TenantServiceAccess(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE,
                                  related_name="service_access")
    who = models.CharField(max_length=8, choices=ServiceAccess.choices)
    # set by admins only: the tenant may mark a service workload public (no login at all)
    allow_public = models.BooleanField(default=False)
    # set by admins only: may the tenant's users SSH into its workloads
    ssh_enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantServiceAccessQuerySet.as_manager()

    def __str__(self) -> str:
        return f"service access of {self.tenant}: {self.who}"
