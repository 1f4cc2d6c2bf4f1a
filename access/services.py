"""Writes and decisions of workload access: a service workload's OAuth client, the tenant's rule,
the proxy's configuration, and the short-lived bearer tokens scripts use.

The proxy's client secret and cookie secret are derived from the portal's SECRET_KEY and the
client id (HMAC): a retried create task writes the same Secret, and no plaintext secret is
stored in the database (django-oauth-toolkit keeps only the client secret's hash).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re

from django.conf import settings
from django.db import transaction

from audit.services import Actor, audit_record
from identity.models import User
from tenants.models import Tenant

from .models import ServiceAccess, TenantServiceAccess

log = logging.getLogger(__name__)


class AccessRefused(Exception):
    """The user may not open this workload; the message says why."""

    code = "access_denied"


# --- the tenant's rule ----------------------------------------------------------------------

def tenant_service_access(tenant: Tenant) -> TenantServiceAccess:
    """The tenant's rule; the site default (not saved) until someone sets one."""
    try:
        return tenant.service_access  # loaded with the tenant where the query selected it
    except TenantServiceAccess.DoesNotExist:
        return TenantServiceAccess(tenant=tenant, who=settings.PORTAL_SERVICE_ACCESS_DEFAULT,
                                   ssh_enabled=settings.PORTAL_SSH_ENABLED_DEFAULT)


def service_access_update(*, tenant: Tenant, actor: Actor, who: str | None = None,
                          allow_public: bool | None = None,
                          ssh_enabled: bool | None = None) -> TenantServiceAccess:
    """Change who may open the tenant's workloads (managers, admins), whether it may open
    them to anyone and whether its users may SSH into them (admins only: the caller checks).
    Audited."""
    if who is not None and who not in ServiceAccess.values:
        raise ValueError(f"who must be one of {', '.join(ServiceAccess.values)}")
    with transaction.atomic():
        current = tenant_service_access(tenant)
        before = {"who": current.who, "allow_public": current.allow_public,
                  "ssh_enabled": current.ssh_enabled}
        if who is not None:
            current.who = who
        if allow_public is not None:
            current.allow_public = allow_public
        if ssh_enabled is not None:
            current.ssh_enabled = ssh_enabled
        after = {"who": current.who, "allow_public": current.allow_public,
                 "ssh_enabled": current.ssh_enabled}
        if after != before or current.pk is None:
            current.save()
            audit_record(actor=actor, action="tenant.service_access", tenant=tenant,
                         target=tenant.name, before=before, after=after)
    return current


# --- a workload's client --------------------------------------------------------------------

def _derived(purpose: str, client_id: str) -> bytes:
    return hmac.new(settings.SECRET_KEY.encode(), f"{purpose}:{client_id}".encode(),
                    hashlib.sha256).digest()


def client_secret_for(client_id: str) -> str:
    return base64.urlsafe_b64encode(_derived("auth-proxy-client", client_id)).decode().rstrip("=")


def cookie_secret_for(client_id: str) -> str:
    """32 random-looking bytes, base64url: what oauth2-proxy takes as an AES-256 cookie key."""
    return base64.urlsafe_b64encode(_derived("auth-proxy-cookie", client_id)).decode()


def identity_claims(user: User) -> dict[str, object]:
    """What the proxies learn of a user: the name, and an e-mail address (oauth2-proxy keys
    sessions by it; Keystone users often have none, so one is made up under `.invalid`)."""
    domain = re.sub(r"[^a-z0-9-]+", "-", (getattr(user, "domain_name", "") or "keystone").lower())
    # the made-up address from the Keystone user id (`username`): two users of one name in
    # two domains must not share a proxy session
    local = re.sub(r"[^A-Za-z0-9._+-]+", ".", user.username)
    email = user.email or f"{local}@{domain.strip('-') or 'keystone'}.invalid"
    return {"preferred_username": user.label, "name": user.get_full_name() or user.label,
            "email": email.lower(), "email_verified": True}
