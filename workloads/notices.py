"""Telling a workload's owner that Kueue took its GPUs back for their owner's tenant.

Kueue preempts a borrowing workload at once when the lending tenant needs its GPUs: a batch Job
is suspended (its pod is stopped with its termination grace period, Kubernetes' 30 s, to save
its work) and goes back to the queue, where it starts again when GPUs are
free; nothing is lost. The tracker sees the move from running back to queued and calls
`workload_reclaimed`: a Warning event (on the workload page and in its events), an audit record
(the admins' trail of reclaims) and a notification to the owner (notifications: in the portal,
by e-mail and webhooks as they chose), as idle culling warns.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from audit.services import audit_record

from .journal import notify_owner, workload_event
from .models import Workload

log = logging.getLogger(__name__)


def reclaim_text(workload: Workload, reason: str) -> str:
    gpus = workload.gpu_total  # a group gives back every node's
    return (f"Its {gpus} {workload.gpu_type.slug} GPU"
            f"{'s were' if gpus != 1 else ' was'} borrowed from another project, "
            "which needs them now. "
            + ("It was stopped and is back in the queue; it starts again when GPUs are free."
               if workload.kind == "batch" else
               "It is back in the queue and starts again when GPUs are free.")
            + (f" ({reason})" if reason else ""))


def workload_reclaimed(*, workload: Workload, reason: str) -> None:
    """The notice of a preemption: event, audit record, notification."""
    text = reclaim_text(workload, reason)
    workload_event(workload=workload, reason="Preempted", message=text, type="Warning",
                   source="queue")
    audit_record(actor=None, action="workload.reclaim", tenant=workload.tenant,
                 target=workload.object_name,
                 after={"id": workload.pk, "gpu_type": workload.gpu_type.slug,
                        "gpu_count": workload.gpu_count, "nodes": workload.nodes,
                        "reason": reason})
    notify_owner(workload, kind="reclaim", title=f"{workload.name} (#{workload.pk}) was preempted",
                 text=text, key=f"reclaim:{workload.pk}:{timezone.now().isoformat()}")
