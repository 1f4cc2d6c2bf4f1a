"""Celery tasks of the workloads domain. Each takes an id, fetches, calls the cluster once over,
and is safe to run twice (deterministic names; 409 means adopt)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import F, Q
from django.utils import timezone

from core.tasks import BoundTask, bound_task, task
from kube.client import Kube, KubeRefused, KubeUnavailable, NotAuthorized, NotFound
from kube.kueue import queueing_on
from tenants.kueue import QUEUED_REASON
from tenants.provisioning import tenant_reconcile

from .journal import notify_owner, workload_event
from .models import Workload
from .objects import (
    ClaimGoing,
    workload_address_release,
    workload_kube,
    workload_objects_create,
    workload_objects_delete,
)
from .queue import queue_places, queue_text
from .services import workload_launch_spec_freeze, workload_stop
from .transitions import workload_transition

log = logging.getLogger(__name__)

# A launch keeps trying for about three minutes (1 + 2 + 4 + 8 + 16 + 30 × 5 s) before it fails
# with "the cluster could not be reached".
# the owner of a workload with a maximum runtime hears this long before it is stopped
RUNTIME_NEAR = dt.timedelta(minutes=30)
MAX_RETRIES = 10
MAX_BACKOFF_SECONDS = 30

# A database restarting under a task is retried with backoff like a cluster outage, so the
# message is not acked as failed and the launch or stop left to the stale sweep.
RETRY_WHILE_DATABASE_DOWN = {"autoretry_for": (OperationalError, InterfaceError),
                             "retry_backoff": True, "retry_backoff_max": MAX_BACKOFF_SECONDS}


# What a launch says while its project's namespace is made again on the cluster (an operator
# deleted it, or the portal now talks to another cluster than the one it provisioned).
NAMESPACE_MISSING_REASON = ("Preparing the project's namespace: it was missing on the cluster "
                            "and is being made again.")
NAMESPACE_TERMINATING_REASON = ("Waiting for the project's namespace, which is being deleted on "
                                "the cluster, to be gone; it is made again then")

CLAIM_GOING_REASON = ("Waiting for an earlier copy of a volume it mounts, which is being "
                      "deleted on the cluster, to be gone; it is made anew then")


class NamespaceTerminating(Exception):
    """The tenant's namespace is being deleted on the cluster: nothing can be created in it
    until it is gone (and then made again). Waited out like an outage."""


def _backoff(retries: int) -> int:
    """Seconds until the next try: doubling, and always well under the stale-launch threshold,
    so that a task waiting for its next try never looks stalled to `workloads_requeue_stale`
    (each task refreshes `updated_at` when it tries; a sweep in the gap would start a second
    chain of retries, and one more at every sweep while the outage lasts)."""
    doubled: int = 2 ** retries  # (int ** int is Any to the checker: a negative power is a float)
    requeue_seconds: int = settings.PORTAL_LAUNCH_REQUEUE_SECONDS
    return min(doubled, MAX_BACKOFF_SECONDS, max(1, requeue_seconds // 2))


# no limit declared: the task gives up by itself on what it may give up on (MAX_RETRIES tries of
# a cluster that answers but holds the launch up), never on an outage
@bound_task(acks_late=True, reject_on_worker_lost=True, max_retries=None,
            ignore_result=True, **RETRY_WHILE_DATABASE_DOWN)
def workload_create_task(self: BoundTask, workload_id: int) -> None:
    """Create the workload's objects in its namespace; then the tracker follows it."""
    claimed = workload_transition(
        workload_id=workload_id, allowed_from=(Workload.State.SUBMITTED, Workload.State.CREATING),
        to=Workload.State.CREATING, launch_attempts=F("launch_attempts") + 1)
    if not claimed:
        return  # stopped, or already past creation: nothing to do
    workload = Workload.objects.select_related("tenant", "owner", "template", "gpu_type").get(
        pk=workload_id)
    if not workload.launch_spec:
        # admitted by a portal older than the frozen spec (a rolling upgrade): frozen now
        workload_launch_spec_freeze(workload=workload)
    try:
        kube = workload_kube(workload)  # the cluster its objects go to
        queued = queueing_on(kube)
        created = _objects_create_in_namespace(workload, kube, queued=queued)
    except (KubeUnavailable, NotAuthorized, NamespaceTerminating, ClaimGoing) as exc:
        # a cluster that does not answer is waited for as long as it takes: an accepted launch
        # is never lost to an outage (its owner may stop it meanwhile); what the cluster
        # answers but holds up (the portal's identity refused, a deletion that never ends) is
        # given up after MAX_RETRIES tries, saying why
        if not isinstance(exc, KubeUnavailable) and self.request.retries >= MAX_RETRIES:
            if isinstance(exc, NamespaceTerminating):
                reason = f"The project's namespace stayed in deletion on the cluster: {exc}"
            elif isinstance(exc, ClaimGoing):
                reason = f"A volume it mounts stayed in deletion on the cluster: {exc}"
            else:
                reason = f"The cluster refused the portal's identity: {exc}"
            workload_transition(workload_id=workload_id, allowed_from=(Workload.State.CREATING,),
                                to=Workload.State.FAILED, reason=reason)
            workload_event(workload=workload, reason="CreateFailed", type="Warning",
                           message=f"gave up after {self.request.retries + 1} tries: {exc}")
            return
        # it waits as "creating", saying why (an API server or Kueue's admission webhook
        # that does not answer, a namespace still being deleted), and carries on after
        waiting = {NamespaceTerminating: NAMESPACE_TERMINATING_REASON,
                   ClaimGoing: CLAIM_GOING_REASON}.get(type(exc), "Waiting for the cluster")
        _creating_reason(workload_id, f"{waiting} (try {self.request.retries + 1}): {exc}")
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
    except (KubeRefused, NotFound) as exc:
        # NotFound: the namespace is still missing after the tenant's reconcile (its tenant is
        # being deleted), or a kind the cluster does not serve
        workload_transition(workload_id=workload_id, allowed_from=(Workload.State.CREATING,),
                            to=Workload.State.FAILED, reason=f"The cluster refused it: {exc}")
        workload_event(workload=workload, reason="CreateFailed", message=str(exc), type="Warning")
        return
    if queued:
        next_state, reason = Workload.State.QUEUED, QUEUED_REASON
    else:
        next_state, reason = Workload.State.PENDING, "Waiting for the cluster to start it."
    made = {"reason": "Created",
            "message": ", ".join(created) if created else "objects already present (adopted)"}
    # the event in the move's own transaction: one turn of the database's write lock rather
    # than two, for every launch of a burst (the demo's SQLite takes one writer at a time)
    moved = workload_transition(workload_id=workload_id, allowed_from=(Workload.State.CREATING,),
                                to=next_state, reason=reason, event=made)
    if not moved:  # the tracker saw its objects first and moved it on: the event all the same
        workload_event(workload=workload, **made)
    if moved and queued:
        _queued_notice_later(workload)


def _queued_notice_later(workload: Workload) -> None:
    """The "queued" notice, sent PORTAL_QUEUED_NOTICE_SECONDS from now if the launch still
    waits then. Most launches are admitted within seconds, and their owner hears "started": a
    notice of a wait already over told them nothing. Worked out here, it cost every launch of
    a burst its queue place (a list of the tenant's Kueue Workloads, the estimates from the
    database) and a notification written, in the same seconds as the burst's own creates. A
    notice that cannot be sent (the broker down) is left out: it is a courtesy."""
    try:
        workload_queued_notice_task.apply_async(
            (workload.pk, workload.launch_attempts),
            countdown=settings.PORTAL_QUEUED_NOTICE_SECONDS)
    except Exception:  # noqa: BLE001 - kombu's OperationalError and whatever a broker raises
        log.warning("workload %s: its queued notice could not be sent", workload.pk,
                    exc_info=True)


@task(ignore_result=True)
def workload_queued_notice_task(workload_id: int, attempt: int) -> None:
    """Tell the owner that the launch (its try `attempt`) waits in the queue, if it still does;
    once per try (the notification's key)."""
    workload = Workload.objects.select_related("tenant", "owner", "gpu_type").filter(
        pk=workload_id).first()
    if workload is None or workload.launch_attempts != attempt:
        return  # removed, or launched again since: that try sends its own
    _queued_notice(workload)


def _queued_notice(workload: Workload) -> None:
    """The owner hears that the launch waits in the queue, with its place and estimate where
    they are known (Kueue may not list it yet: then the estimate alone)."""
    if workload.state != Workload.State.QUEUED:
        return  # admitted already: "started" tells it
    try:
        # asked afresh: a list remembered from a moment ago lacks this launch, and would be
        # shown to the pages for its few seconds
        place = queue_places([workload], remembered=False).get(workload.pk)
    except Exception:  # noqa: BLE001 - the place is a courtesy; the notice goes without it
        log.info("workload %s: no queue place for its notice", workload.pk, exc_info=True)
        place = None
    notify_owner(workload, kind="queued", key=f"queued:{workload.pk}:{workload.launch_attempts}",
                 title=f"{workload.name} (#{workload.pk}) is queued",
                 text=f"{workload.name} in {workload.tenant.name} waits for "
                      f"{workload.gpu_total}× {workload.gpu_type.slug}: "
                      f"{queue_text(workload, place)}.")


def _creating_reason(workload_id: int, reason: str) -> None:
    """Say why a launch still shows `creating` (no state move: the task holds the claim)."""
    Workload.objects.filter(pk=workload_id, state=Workload.State.CREATING).update(
        reason=reason[:2000])


def _objects_create_in_namespace(workload: Workload, kube: Kube, *, queued: bool) -> list[str]:
    """workload_objects_create; where the tenant's namespace is gone from the cluster (an
    operator deleted it, or the portal was pointed at another cluster: the tenant is still
    marked provisioned, and the cluster answers 404 "namespaces … not found"), the tenant is
    provisioned again first (tenants/provisioning.py), saying so in the workload's reason.
    A namespace still being deleted raises NamespaceTerminating, to be waited out."""
    try:
        return workload_objects_create(workload, kube, queued=queued)
    except (NotFound, KubeRefused) as exc:
        if isinstance(exc, NotAuthorized):
            raise
        namespace = kube.get("Namespace", workload.tenant.namespace)
        if namespace is not None:
            if namespace["metadata"].get("deletionTimestamp"):
                raise NamespaceTerminating(str(exc)) from exc
            raise  # something else was not found or refused
    log.warning("workload %s: the namespace %s of %s is missing on the cluster; provisioning "
                "the tenant again", workload.pk, workload.tenant.namespace, workload.tenant.name)
    _creating_reason(workload.pk, NAMESPACE_MISSING_REASON)
    result = tenant_reconcile(tenant_id=workload.tenant_id, kube=kube)
    workload_event(workload=workload, reason="NamespaceProvisioned", type="Warning",
                   message="the project's namespace was missing on the cluster; made again: "
                           + ", ".join(result.created))
    return workload_objects_create(workload, kube, queued=queued)


@bound_task(acks_late=True, reject_on_worker_lost=True, max_retries=None,
            ignore_result=True, **RETRY_WHILE_DATABASE_DOWN)
def workload_stop_task(self: BoundTask, workload_id: int) -> None:
    """Delete a stopping workload's objects, then mark it stopped. Retries until the cluster
    answers: a stop is never dropped. Each try refreshes `updated_at`, as a launch's claim
    does, so that the stale sweep leaves a stop alone while its task is alive."""
    trying = Workload.objects.filter(pk=workload_id, state=Workload.State.STOPPING).update(
        updated_at=timezone.now())
    if not trying:
        return
    workload = Workload.objects.select_related("tenant").get(pk=workload_id)
    try:
        workload_objects_delete(workload, workload_kube(workload))
    except (KubeUnavailable, NotAuthorized) as exc:
        raise self.retry(exc=exc, countdown=_backoff(min(self.request.retries, 6))) from exc
    workload_transition(workload_id=workload_id, allowed_from=(Workload.State.STOPPING,),
                        to=Workload.State.STOPPED)
    workload_event(workload=workload, reason="Stopped", message=workload.reason)


@bound_task(acks_late=True, reject_on_worker_lost=True, max_retries=None,
            ignore_result=True, **RETRY_WHILE_DATABASE_DOWN)
def workload_remove_objects_task(self: BoundTask, workload_id: int) -> None:
    """Delete the objects of a finished workload its owner deleted (a batch Job and, through
    background propagation, its pod; a Secret) now rather than at the Job's TTL. Retries until
    the cluster answers; the tracker removes what is left of a deleted workload too."""
    workload = Workload.objects.select_related("tenant").filter(
        pk=workload_id, deleted_at__isnull=False, state__in=Workload.FINAL_STATES).first()
    if workload is not None:
        _delete_finished(self, workload, workload_objects_delete, reason="Removed",
                         message="its objects were deleted from the cluster with the workload")


def _delete_finished(task: BoundTask, workload: Workload, delete: Callable[[Workload, Kube], int], *,
                     reason: str, message: str) -> None:
    """Delete some of a finished workload's objects (`delete` says which), retried until the
    cluster answers; an event when there was something to delete."""
    try:
        deleted = delete(workload, workload_kube(workload))
    except (KubeUnavailable, NotAuthorized) as exc:
        raise task.retry(exc=exc, countdown=_backoff(min(task.request.retries, 6))) from exc
    if deleted:
        workload_event(workload=workload, reason=reason, message=message)


@bound_task(acks_late=True, reject_on_worker_lost=True, max_retries=None,
            ignore_result=True, **RETRY_WHILE_DATABASE_DOWN)
def workload_address_release_task(self: BoundTask, workload_id: int) -> None:
    """A finished batch job reached for SSH gives its address back (its Service and Ingress).
    Retries until the cluster answers; deleting what is gone already is no error."""
    workload = Workload.objects.select_related("tenant").filter(
        pk=workload_id, state__in=Workload.FINAL_STATES).first()
    if workload is not None:
        _delete_finished(self, workload, workload_address_release, reason="AddressReleased",
                         message="it ended: its address for SSH was given back")


@task(ignore_result=True)
def workloads_requeue_stale() -> int:
    """Periodic: hand launches and stops that made no progress back to a worker (a lost
    message, a worker killed mid-task, a broker restart). Safe: the tasks are idempotent."""
    cutoff = timezone.now() - dt.timedelta(seconds=settings.PORTAL_LAUNCH_REQUEUE_SECONDS)
    stale = Workload.objects.filter(updated_at__lt=cutoff).filter(
        Q(state__in=[Workload.State.SUBMITTED, Workload.State.CREATING])
        | Q(state=Workload.State.STOPPING))
    count = 0
    for workload_id, state in stale.values_list("pk", "state"):
        task = workload_stop_task if state == Workload.State.STOPPING else workload_create_task
        task.delay(workload_id)
        count += 1
    if count:
        log.info("requeued %d stalled workloads", count)
    return count


def _runtime_near_notices(now: dt.datetime) -> int:
    """The owners of workloads that reach their maximum runtime within RUNTIME_NEAR are told
    once (the key names the limit: a limit moved later is told again)."""
    told = 0
    near = Workload.objects.filter(
        state=Workload.State.RUNNING, expires_at__gt=now, expires_at__lte=now + RUNTIME_NEAR,
        # a run no longer than the notice's lead: its owner knew the end when they launched it
        max_runtime_minutes__gt=RUNTIME_NEAR.total_seconds() / 60,
    ).select_related("owner", "tenant", "gpu_type")
    for workload in near:
        assert workload.expires_at is not None  # (filtered)
        left = max(round((workload.expires_at - now).total_seconds() / 60), 1)
        told += notify_owner(
            workload, kind="runtime_near", key=f"runtime:{workload.pk}:{int(workload.expires_at.timestamp())}",
            title=f"{workload.name} (#{workload.pk}) stops in {left} min",
            text=f"{workload.name} in {workload.tenant.name} reaches its maximum runtime of "
                 f"{workload.max_runtime_minutes} minutes at {workload.expires_at:%Y-%m-%d %H:%M %Z}"
                 " and will be stopped then. Save your work.")
    return told


@task(ignore_result=True)
def workloads_enforce_runtime() -> int:
    """Periodic: tell the owners of workloads near their maximum runtime (once each), and stop
    services that reached it (Jobs have activeDeadlineSeconds for that)."""
    now = timezone.now()
    _runtime_near_notices(now)
    due = Workload.objects.filter(state=Workload.State.RUNNING, expires_at__lte=now)
    count = 0
    for workload in due:
        workload_stop(workload=workload, user=None,
                      reason=f"Reached its maximum runtime of {workload.max_runtime_minutes} minutes.")
        count += 1
    return count
