"""SSH into workloads: the certificates the portal issues, and the sessions a workload's SSH
server reports (start, periodic check, end). Audited; the workload's proxy's rule narrowed to
members decides (access.rules.may_ssh, with the user's role asked of Keystone now). The principal is
derived from the user's Keystone user id (access.ssh.principal_for), never from their name."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from access.rules import Decision
from access.services import tenant_service_access
from access.ssh import (
    Certificate,
    certificate_for,
    fingerprint,
    host_alias,
    host_key_for,
    parse_public_key,
    principal_for,
    ssh_config_block,
)
from audit.services import audit_record
from identity.client import KeystoneUnavailable
from identity.models import User
from identity.roles import PortalRole

from .access import access_decision, workload_access
from .models import SSHCertificate, SSHSession, Workload
from .oidc import user_decision

log = logging.getLogger(__name__)

class SSHRefused(Exception):
    """The user may not SSH into this workload; the message says why. `code`: the API's."""

    def __init__(self, message: str, code: str = "access_denied") -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class IssuedCertificate:
    certificate: Certificate
    principal: str
    ssh_config: str
    known_hosts: str
    host_alias: str


def ssh_refusal(workload: Workload) -> SSHRefused | None:
    """Why nobody may SSH into the workload now, or None."""
    if not tenant_service_access(workload.tenant).ssh_enabled:
        return SSHRefused(f"SSH is turned off for {workload.tenant.name}; an admin can turn it "
                          "on.", "ssh_disabled")
    if not (workload.launch_spec or {}).get("ssh") or workload_access(workload) is None:
        return SSHRefused("This workload was launched without SSH.", "ssh_unavailable")
    if not workload.is_active or workload.deleted_at is not None:
        return SSHRefused("The workload is not running any more.", "ssh_unavailable")
    return None


def ssh_certificate_issue(*, workload: Workload, user: User, role: PortalRole | None,
                          is_admin: bool, public_key: str, from_address: str = "",
                          now: dt.datetime | None = None) -> IssuedCertificate:
    """A certificate for `public_key`, for this user on this workload only, when the tenant's
    rule lets the user open it (SSHRefused otherwise; KeyRefused for a key it cannot sign).
    Audited: serial, principal, the key's fingerprint, validity, from where."""
    refusal = ssh_refusal(workload)
    if refusal:
        raise refusal
    decision = access_decision(workload=workload, user=user, role=role, is_admin=is_admin,
                               ssh=True)
    if not decision:
        raise SSHRefused(decision.reason)
    key = parse_public_key(public_key)
    principal = principal_for(user.username)
    certificate = certificate_for(public_key=key, principal=principal,
                                  workload_id=workload.pk, now=now or timezone.now())
    key_fingerprint = fingerprint(key)
    with transaction.atomic():
        SSHCertificate.objects.create(
            workload=workload, user=user, serial=certificate.serial, principal=principal,
            key_id=certificate.key_id, key_fingerprint=key_fingerprint,
            valid_after=certificate.valid_after, valid_before=certificate.valid_before,
            from_address=from_address[:64], as_admin=is_admin)
        audit_record(actor=user, action="workload.ssh_certificate", tenant=workload.tenant,
                     target=workload.object_name or str(workload.pk),
                     after={"id": workload.pk, "serial": certificate.serial,
                            "principal": principal, "key": key_fingerprint,
                            "valid_until": certificate.valid_before.isoformat(),
                            "from": from_address})
    log.info("ssh certificate issued: workload=%s user=%s serial=%s key=%s", workload.pk,
             principal, certificate.serial, key_fingerprint)
    access = workload_access(workload)
    assert access is not None  # ssh_refusal said so
    _, host_public = host_key_for(access.client_id)
    alias = host_alias(workload.pk)
    return IssuedCertificate(
        certificate=certificate, principal=principal,
        ssh_config=ssh_config_block(workload_id=workload.pk, principal=principal),
        known_hosts=f"{alias} {' '.join(host_public.split()[:2])}", host_alias=alias)


# --- the server's reports ---------------------------------------------------------------------

def _live_decision(workload: Workload, certificate: SSHCertificate) -> Decision:
    """SSH's rule now for the certificate's user (their role asked of Keystone, cached
    briefly): a member demoted to reader loses their sessions at the next check."""
    return user_decision(workload=workload, user=certificate.user,
                         is_admin=certificate.as_admin, ssh=True)


def _why_not(workload: Workload, certificate: SSHCertificate | None) -> str:
    """Why a session of `certificate` may not go on now ("" when it may)."""
    if certificate is None:
        return "the portal never issued that certificate"
    refusal = ssh_refusal(workload)
    if refusal:
        return str(refusal)
    try:
        decision = _live_decision(workload, certificate)
    except KeystoneUnavailable:
        return ""  # the proxy's offline rule: what was admitted stands while Keystone is away
    return "" if decision else decision.reason


def _session_start(workload: Workload, payload: dict[str, Any]) -> dict[str, Any]:
    session_id: uuid.UUID = payload["session"]
    existing = SSHSession.objects.filter(workload=workload, session=session_id).first()
    if existing is not None:  # a retried start: the first answer stands
        return ({"allowed": True} if existing.ended_at is None
                else {"allowed": False, "reason": existing.end_reason})
    certificate = (SSHCertificate.objects.select_related("user")
                   .filter(workload=workload, serial=payload["serial"],
                           principal=payload["user"]).first())
    if certificate is not None and certificate.valid_before <= timezone.now():
        reason = "the certificate has expired"
    else:
        reason = _why_not(workload, certificate)
    if reason:
        log.warning("ssh session refused: workload=%s user=%s from=%s: %s", workload.pk,
                    payload["user"], payload.get("from", ""), reason)
        return {"allowed": False, "reason": reason}
    assert certificate is not None
    try:
        with transaction.atomic():
            SSHSession.objects.create(workload=workload, session=session_id,
                                      user=certificate.user, certificate=certificate,
                                      principal=certificate.principal,
                                      from_address=(payload.get("from") or "")[:64])
            audit_record(actor=certificate.user, action="workload.ssh_session_start",
                         tenant=workload.tenant, target=workload.object_name or str(workload.pk),
                         after={"id": workload.pk, "session": str(session_id),
                                "user": certificate.principal, "from": payload.get("from", ""),
                                "serial": certificate.serial})
    except IntegrityError:  # the same start, raced in twice
        pass
    log.info("ssh session started: workload=%s user=%s from=%s", workload.pk,
             certificate.principal, payload.get("from", ""))
    return {"allowed": True}


def _session_end(workload: Workload, session: SSHSession, reason: str) -> bool:
    """Mark the session ended (once) and audit it with its duration; False if it was already."""
    now = timezone.now()
    with transaction.atomic():
        ended = SSHSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(
            ended_at=now, end_reason=reason[:255])
        if not ended:
            return False
        duration = int((now - session.started_at).total_seconds())
        audit_record(actor=session.user, action="workload.ssh_session_end",
                     tenant=workload.tenant, target=workload.object_name or str(workload.pk),
                     after={"id": workload.pk, "session": str(session.session),
                            "user": session.principal, "from": session.from_address,
                            "duration_seconds": duration, "reason": reason})
    log.info("ssh session ended: workload=%s user=%s duration=%ss: %s", workload.pk,
             session.principal, duration, reason)
    return True


def _sessions_check(workload: Workload, session_ids: list[uuid.UUID]) -> dict[str, Any]:
    sessions = {s.session: s for s in SSHSession.objects.select_related("certificate__user")
                .filter(workload=workload, session__in=session_ids)}
    verdicts: dict[int | None, str] = {}  # one decision per certificate
    end: dict[str, str] = {}
    for session_id in session_ids:
        session = sessions.get(session_id)
        if session is None:
            end[str(session_id)] = "the portal does not know this session"
            continue
        if session.ended_at is not None:
            end[str(session_id)] = session.end_reason or "it was ended"
            continue
        key = session.certificate_id
        if key not in verdicts:
            verdicts[key] = _why_not(workload, session.certificate)
        reason = verdicts[key]
        if reason:
            _session_end(workload, session, f"access ended: {reason}")
            end[str(session_id)] = reason
    SSHSession.objects.filter(workload=workload, session__in=session_ids,
                              ended_at__isnull=True).update(last_checked_at=timezone.now())
    return {"end": end}


def ssh_session_report(*, workload: Workload, event: str, payload: dict[str, Any],
                       ) -> dict[str, Any]:
    """What a workload's SSH server reported, and the portal's answer to it."""
    if event == "start":
        return _session_start(workload, payload)
    if event == "check":
        return _sessions_check(workload, payload["sessions"])
    session = SSHSession.objects.select_related("user").filter(
        workload=workload, session=payload["session"]).first()
    if session is not None:
        _session_end(workload, session, payload.get("reason") or "closed")
    return {}
