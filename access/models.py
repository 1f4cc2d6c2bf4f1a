"""Who may reach a service workload through its authenticating proxy.

- `TenantServiceAccess`: a tenant's rule (owner only / members / readers) and whether an admin
  lets it open workloads to anyone.
- `WorkloadAccess`: a service workload's OAuth client (a django-oauth-toolkit Application whose
  client id is the audience of the workload's tokens) and whether it is public.
- `ProxySession`: one browser session admitted by a workload's proxy, tied to the portal
  session it came from; each refresh re-checks both (access/oidc.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .querysets import TenantServiceAccessQuerySet, WorkloadAccessQuerySet


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
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantServiceAccessQuerySet.as_manager()

    def __str__(self) -> str:
        return f"service access of {self.tenant}: {self.who}"


class WorkloadAccess(models.Model):
    workload = models.OneToOneField("workloads.Workload", on_delete=models.CASCADE,
                                    related_name="access")
    application = models.OneToOneField("oauth2_provider.Application",
                                       on_delete=models.CASCADE, related_name="workload_access")
    public = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkloadAccessQuerySet.as_manager()

    def __str__(self) -> str:
        return f"access to {self.workload}"

    @property
    def client_id(self) -> str:
        return str(self.application.client_id)  # django-oauth-toolkit ships no types


class ProxySession(models.Model):
    """A proxy session: created with the authorization code, then tied to the family of
    refresh tokens the proxy holds (one family across rotations, so two requests refreshing at
    once with the same token find the same session)."""

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE,
                                 related_name="proxy_sessions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    # the portal session the user signed in with: when it ends (logout, expiry, revoked
    # Keystone token) the proxy session ends at its next refresh
    portal_session_key = models.CharField(max_length=64)
    code = models.CharField(max_length=255, null=True, blank=True, unique=True)  # noqa: DJ001
    # the refresh tokens the proxy holds, one family across rotations
    token_family = models.UUIDField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    checked_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_reason = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["portal_session_key"])]

    def __str__(self) -> str:
        return f"{self.user} on {self.workload}"
