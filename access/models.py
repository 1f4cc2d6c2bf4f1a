"""Who may reach a service workload through its authenticating proxy.

- `TenantServiceAccess`: a tenant's rule (owner only / members / readers) and whether an admin
  lets it open workloads to anyone.
- `WorkloadAccess`: a service workload's OAuth client (a django-oauth-toolkit Application whose
  client id is the audience of the workload's tokens) and whether it is public.
- `ProxySession`: one browser session admitted by a workload's proxy, tied to the portal
  session it came from; each refresh re-checks both (access/oidc.py).
- `SSHCertificate`: an SSH certificate the portal signed for a user's key and one workload
  (access/ssh.py); `SSHSession`: one SSH connection to a workload's server, as the server
  reported it (start, checks, end).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .querysets import (
    SSHCertificateQuerySet,
    SSHSessionQuerySet,
    TenantServiceAccessQuerySet,
    WorkloadAccessQuerySet,
)


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
    # set by admins only: may the tenant's users SSH into its workloads (issue 26)
    ssh_enabled = models.BooleanField(default=True)
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


class SSHCertificate(models.Model):
    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE,
                                 related_name="ssh_certificates")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    serial = models.BigIntegerField(unique=True)
    principal = models.CharField(max_length=255)
    key_id = models.CharField(max_length=512)
    key_fingerprint = models.CharField(max_length=80)  # SHA256:…, never the key itself
    valid_after = models.DateTimeField()
    valid_before = models.DateTimeField()
    issued_at = models.DateTimeField(auto_now_add=True)
    from_address = models.CharField(max_length=64, blank=True, default="")
    # issued to a portal admin (who may open any workload): the sessions' checks apply the rule
    # as they did at issue
    as_admin = models.BooleanField(default=False)

    objects = SSHCertificateQuerySet.as_manager()

    def __str__(self) -> str:
        return f"SSH certificate {self.serial} of {self.principal}"


class SSHSession(models.Model):
    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE,
                                 related_name="ssh_sessions")
    session = models.UUIDField()  # the server's id for the connection
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             related_name="+")
    certificate = models.ForeignKey(SSHCertificate, on_delete=models.SET_NULL, null=True,
                                    related_name="sessions")
    principal = models.CharField(max_length=255)
    from_address = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=255, blank=True, default="")

    objects = SSHSessionQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workload", "session"],
                                               name="ssh_session_once_per_workload")]

    def __str__(self) -> str:
        return f"SSH session of {self.principal} on {self.workload_id}"
