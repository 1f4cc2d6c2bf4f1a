"""A workload's journal: the events recorded on it and the notices that tell its owner.

The lowest writer of the workloads app after its models: the state machine (transitions.py)
records an event with each move it makes, and everything above it — services, tasks, the
tracker, notices, culling — records events and tells owners through here (notifications.notify). It imports nothing
of the app but its models (tests/workloads/test_transitions.py checks it).
"""

from __future__ import annotations

import datetime as dt
import logging

from django.utils import timezone

from notifications.models import Notification
from notifications.services import notify

from .models import Workload, WorkloadEvent

log = logging.getLogger(__name__)


def workload_event(*, workload: Workload, reason: str, message: str, type: str = "Normal",
                   source: str = "portal") -> WorkloadEvent:
    """One event on the workload's page (and in its API's events), at now."""
    return WorkloadEvent.objects.create(workload=workload, at=timezone.now(), type=type,
                                        reason=reason, message=message, source=source)


def notify_owner(workload: Workload, *, kind: str, title: str, text: str, key: str) -> int:
    """Tell the workload's owner (notifications.notify: in the portal, and by e-mail and
    webhooks as they chose), once per `key`; in the caller's transaction."""
    return notify(kind=kind, users=[workload.owner], tenant=workload.tenant, title=title,
                  text=text, key=key, workload_id=workload.pk, link=workload.get_absolute_url())


def _duration(seconds: float) -> str:
    minutes = max(int(seconds // 60), 0)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _back_from_the_queue(workload: Workload, before: str) -> bool:
    """A run that starts again after a preemption (queued → running, or through pending),
    not a pod replaced in place (running → pending → running)."""
    if before == Workload.State.QUEUED:
        return True
    last = (Notification.objects.filter(workload_id=workload.pk, user_id=workload.owner_id)
            .order_by("-id").values_list("kind", flat=True).first())
    return before == Workload.State.PENDING and last == "reclaim"


def state_notice(workload: Workload, *, before: str, after: str, reason: str,
                 at: dt.datetime) -> None:
    """What the owner hears of a state change (transitions.py calls it in the move's
    transaction, so a move is told once): started (the first start, or again after the
    queue), finished, failed. Queued is told by a task the create task sends, some seconds
    later if the launch still waits then (with the queue's place),
    a reclaim by notices.py, a stop by workload_stop (when someone else or the portal did it)."""
    State = Workload.State
    name = f"{workload.name} (#{workload.pk})"
    key = f"{after}:{workload.pk}:{at.isoformat()}"
    if after == State.RUNNING and before != State.RUNNING and (
            workload.started_at is None or _back_from_the_queue(workload, before)):
        again = workload.started_at is not None
        notify_owner(workload, kind="started", key=key,
                     title=f"{name} {'started again' if again else 'is running'}",
                     text=f"{name} in {workload.tenant.name} is running on {workload.gpus_text}.")
    elif after == State.SUCCEEDED and before != after:
        ran = f" after {_duration((at - workload.started_at).total_seconds())}" \
            if workload.started_at else ""
        notify_owner(workload, kind="finished", key=key, title=f"{name} finished",
                     text=f"{name} in {workload.tenant.name} finished successfully{ran}.")
    elif after == State.FAILED and before != after:
        notify_owner(workload, kind="failed", key=key, title=f"{name} failed",
                     text=f"{name} in {workload.tenant.name} failed: {reason or 'no reason given'}")
