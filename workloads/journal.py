"""A workload's journal: the events recorded on it and the e-mail that tells its owner.

The lowest writer of the workloads app after its models: the state machine (transitions.py)
records an event with each move it makes, and everything above it — services, tasks, the
tracker, notices, culling — records events and mails owners through here. It imports nothing
of the app but its models (tests/workloads/test_transitions.py checks it).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from .models import Workload, WorkloadEvent

log = logging.getLogger(__name__)


def workload_event(*, workload: Workload, reason: str, message: str, type: str = "Normal",
                   source: str = "portal") -> WorkloadEvent:
    """One event on the workload's page (and in its API's events), at now."""
    return WorkloadEvent.objects.create(workload=workload, at=timezone.now(), type=type,
                                        reason=reason, message=message, source=source)


def mail_owner(workload: Workload, *, subject: str, lead: str, text: str, what: str) -> None:
    """An e-mail to the workload's owner ("your workload … <lead>.", then `text`): only with
    EMAIL_HOST set and the owner's address known; a mail server's failure is logged, never
    raised (the tracker's and culling's cycles go on)."""
    address = (getattr(workload.owner, "email", "") or "").strip()
    if not settings.EMAIL_HOST or not address:
        return
    body = (f"Hello {workload.owner.username},\n\nyour workload {workload.name} "
            f"(#{workload.pk}, project {workload.tenant.name}) {lead}.\n{text}\n")
    try:
        send_mail(f"[GPU portal] {subject}", body, settings.DEFAULT_FROM_EMAIL, [address])
    except Exception as exc:  # noqa: BLE001
        log.warning("%s e-mail for workload %s not sent: %s", what, workload.pk, exc)
