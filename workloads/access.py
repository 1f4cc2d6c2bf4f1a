"""Who reaches one workload: its OAuth client (made at launch, in the launch's transaction), the
proxy's configuration with the secrets derived from it, the tenant's rule applied to this
workload and user, scripts' one-minute bearer tokens, and what the pages and the API say of it.

The rule itself, the proxy's container and the SSH certificate authority are access/'s (below
this app); the rows keyed by the workload are this app's (models.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import secrets
import time
import uuid

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from jwcrypto import jwk, jwt
from oauth2_provider.models import Application

from access.models import ServiceAccess
from access.proxy import CLIENT_SECRET_KEY, COOKIE_SECRET_KEY, PROXY_PORT, ProxySpec
from access.rules import Decision, may_open, may_ssh
from access.services import (
    AccessRefused,
    client_secret_for,
    cookie_secret_for,
    identity_claims,
    tenant_service_access,
)
from audit.services import Actor, audit_record
from credentials.models import Secret
from identity.models import User
from identity.roles import PortalRole
from storage.models import Volume

from .models import Workload, WorkloadAccess

log = logging.getLogger(__name__)

CALLBACK_PATH = "/oauth2/callback"


# --- a workload's client --------------------------------------------------------------------

def workload_access_create(*, workload: Workload, actor: Actor,
                           public: bool = False) -> WorkloadAccess:
    """The OAuth client of a new service workload (inside the launch's transaction). `public`
    only where the tenant's rule allows it; audited."""
    if public and not tenant_service_access(workload.tenant).allow_public:
        raise AccessRefused(f"{workload.tenant.name} may not open workloads to everyone; an "
                            "admin can allow it.")
    client_id = f"workload-{workload.pk}-{secrets.token_hex(8)}"
    application = Application.objects.create(
        name=f"{workload.tenant.name}/{workload.name} (workload {workload.pk})"[:255],
        client_id=client_id,
        client_secret=client_secret_for(client_id),  # stored hashed by django-oauth-toolkit
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="",  # checked against the workload's address (oidc.py)
        skip_authorization=True,  # access is decided by the tenant's rule, not by a consent page
        algorithm=Application.RS256_ALGORITHM,
    )
    access = WorkloadAccess.objects.create(workload=workload, application=application,
                                           public=public)
    if public:
        audit_record(actor=actor, action="workload.public", tenant=workload.tenant,
                     target=workload.object_name or str(workload.pk),
                     after={"id": workload.pk, "public": True})
    return access


def workload_access(workload: Workload) -> WorkloadAccess | None:
    try:
        access: WorkloadAccess = workload.access
    except WorkloadAccess.DoesNotExist:
        return None
    return access


def callback_url(workload: Workload) -> str:
    """Where the workload's proxy receives the login's answer: its own address."""
    base = workload.base_url
    return f"{base}{CALLBACK_PATH}" if base else ""


def workload_proxy(workload: Workload, *, token_env: str | None = None,
                   ) -> tuple[ProxySpec, dict[str, str]] | None:
    """The proxy of a service workload and the values its Secret holds; None for a batch
    workload (or one launched before proxies, which has no client). `token_env`: the variable
    that carries the application's access token, as its launch spec froze it (default: its
    template's now)."""
    access = workload_access(workload)
    # a batch job has a proxy only for SSH: no application behind it
    ssh_only = workload.kind != "service"
    if access is None or (ssh_only and not (workload.launch_spec or {}).get("ssh")) or \
            (not ssh_only and not workload.port):
        return None
    client_id = access.client_id
    spec = ProxySpec(
        image=settings.PORTAL_AUTH_PROXY_IMAGE,
        issuer_url=settings.PORTAL_OIDC_ISSUER,
        backend_url=settings.PORTAL_OIDC_BACKEND_URL or settings.PORTAL_OIDC_ISSUER,
        client_id=client_id,
        secret_name=workload.object_name,
        upstream_port=None if ssh_only else workload.port,
        # a custom service may listen on the proxy's own port: the proxy moves aside
        listen_port=PROXY_PORT if workload.port != PROXY_PORT else PROXY_PORT + 1,
        upstream_token_env=(workload.template.token_env if token_env is None
                            else token_env) or None,
        public=access.public,
        tls_secret=settings.PORTAL_AUTH_PROXY_TLS_SECRET or None,
        cookie_refresh_seconds=settings.PORTAL_AUTH_PROXY_RECHECK_SECONDS,
        session_seconds=settings.PORTAL_AUTH_PROXY_SESSION_SECONDS,
        # behind the shared gateway its address is known at launch, and the request's own
        # scheme is the gateway's business: the callback is named, not guessed from the request
        redirect_url=callback_url(workload) if (workload.launch_spec or {}).get("host")
        else None,
    )
    values = {CLIENT_SECRET_KEY: client_secret_for(client_id),
              COOKIE_SECRET_KEY: cookie_secret_for(client_id)}
    return spec, values


# --- decisions ------------------------------------------------------------------------------

def access_decision(*, workload: Workload, user: AbstractBaseUser | AnonymousUser,
                    role: PortalRole | None, is_admin: bool, who: str | None = None,
                    ssh: bool = False) -> Decision:
    """May `user`, holding `role` in the workload's project, open it now (`ssh`: SSH into it,
    a member's right)? `who`: the tenant's rule when the caller has read it already (a page of
    many workloads)."""
    who = who or tenant_service_access(workload.tenant).who
    rule = may_ssh if ssh else may_open
    is_owner = workload.owner_id == user.pk
    # asked only of those the rule would otherwise let in on the project's rule alone
    private = (not is_admin and not is_owner and role is not None
               and role < PortalRole.MANAGER and holds_owners_own_data(workload))
    return rule(who=who, role=role, is_owner=is_owner, is_admin=is_admin,
                workload_active=workload.is_active and workload.deleted_at is None,
                private=private)


def holds_owners_own_data(workload: Workload) -> bool:
    """Whether the workload mounts one of its owner's own volumes (a mount or its checkpoint
    directory) or reads one of their own secrets, as its launch spec froze them: then it opens
    to its owner and the managers only (access/rules.py). No query for a workload with none."""
    spec = workload.launch_spec or {}
    volumes = [m["volume"] for m in spec.get("mounts") or () if m.get("volume")]
    if (spec.get("checkpoint") or {}).get("volume"):
        volumes.append(spec["checkpoint"]["volume"])
    secrets_read = [s["object_name"] for s in spec.get("secrets") or ()]
    return bool(
        (volumes and Volume.objects.filter(pk__in=volumes, scope=Volume.Scope.USER).exists())
        or (secrets_read and Secret.objects.filter(
            tenant_id=workload.tenant_id, object_name__in=secrets_read,
            scope=Secret.Scope.USER).exists()))


# --- scripts' bearer tokens -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: dt.datetime
    audience: str


def _signing_key() -> jwk.JWK:
    return jwk.JWK.from_pem(settings.PORTAL_OIDC_PRIVATE_KEY.encode())


def workload_token_issue(*, workload: Workload, user: User, role: PortalRole | None,
                         is_admin: bool) -> IssuedToken:
    """A bearer token for this workload only (its client id is the audience), signed with the
    portal's OIDC key, living PORTAL_WORKLOAD_TOKEN_SECONDS: a user who loses access gets no
    new one, and the last one dies within that time."""
    access = workload_access(workload)
    if access is None:
        raise AccessRefused("This workload has no authenticating proxy (it is a batch job, or "
                            "was launched before the portal protected services).")
    decision = access_decision(workload=workload, user=user, role=role, is_admin=is_admin)
    if not decision:
        raise AccessRefused(decision.reason)
    key = _signing_key()
    now = int(time.time())
    expires = now + settings.PORTAL_WORKLOAD_TOKEN_SECONDS
    claims = {"iss": settings.PORTAL_OIDC_ISSUER, "aud": access.client_id,
              "sub": str(user.pk), "azp": access.client_id, "iat": now, "nbf": now,
              "exp": expires, "jti": uuid.uuid4().hex, **identity_claims(user)}
    token = jwt.JWT(header={"alg": "RS256", "kid": key.thumbprint(), "typ": "JWT"},
                    claims=claims)
    token.make_signed_token(key)
    log.info("workload token issued: workload=%s user=%s", workload.pk, user.username)
    return IssuedToken(token=token.serialize(),
                       expires_at=dt.datetime.fromtimestamp(expires, dt.UTC),
                       audience=access.client_id)


def workload_access_summary(workload: Workload) -> dict[str, object] | None:
    """What the workload page and the API say about how it is reached (None: a batch job)."""
    if workload.kind != "service":
        return None
    access = workload_access(workload)
    rule = tenant_service_access(workload.tenant)
    return {
        "protected": access is not None and not access.public,
        "public": bool(access and access.public),
        "who": rule.who,
        "who_label": ServiceAccess(rule.who).label,
    }
