"""Writes of the workloads domain: launch (admission under quota), stop, delete.

Admission runs in one database transaction that locks the tenant row, so concurrent launches of
one tenant are serialised and can never over-admit. Cluster work happens in Celery tasks
enqueued on commit: an accepted launch is in the database before anything else happens.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from catalogue.models import Template
from catalogue.sharing import equivalents_text
from clusters.models import home_cluster_name
from core.tasks import send_on_commit
from identity.models import User
from kube.client import Kube, KubeError
from kube.kueue import queueing_on
from kube.labels import MAX_GROUP_OBJECT_NAME, workload_object_name
from storage.models import Dataset, Volume
from storage.services import StorageQuotaExceeded, volume_home_ensure
from tenants.figures import QuotaFigures
from tenants.models import Department, Quota, Tenant
from tenants.selectors import quota_figures

from . import metrics
from .access import workload_access_create
from .hooks import ADMISSION_CHECKS
from .journal import notify_owner, workload_event
from .launch_spec import launch_spec_from_rows
from .manifests import CHECKPOINT_MOUNT_PATH, HOME_MOUNT_PATH
from .models import Workload, WorkloadMount, objects_cluster
from .mounts import ResolvedCheckpoint, ResolvedMount
from .selectors import department_refusal, quota_use, service_addresses
from .transitions import STOPPABLE, workload_transition

log = logging.getLogger(__name__)


class AdmissionRefused(Exception):
    """A launch the tenant's quota does not allow; the message names the limit."""

    code = "quota_exceeded"


class DepartmentCapExceeded(AdmissionRefused):
    """A launch its project's quota allows but its department's cap does not: the department's
    projects hold together what the cap allows."""

    code = "department_cap_exceeded"


class AddressesExhausted(AdmissionRefused):
    """A service launch while the load balancer's pool has no address left for it: it would
    hold its GPUs unreachable until another service's address is freed."""

    code = "no_address_free"


def _address_check(request: dict[str, Any]) -> None:
    """Refuse a service launch that could get no address (PORTAL_SERVICE_EXPOSURE=
    loadbalancer, where MetalLB's pools can be read). Advisory across tenants: two launches
    of different tenants at the same moment may both pass for the last address; the later
    one then waits for one, saying so (lifecycle.address_wait)."""
    if request["kind"] != Template.Kind.SERVICE:
        return
    addresses = service_addresses(request.get("cluster"))
    if addresses.exhausted:
        waiting = (f", and {addresses.waiting} service(s) launched before wait for one"
                   if addresses.waiting else "")
        raise AddressesExhausted(
            f"No external address is free for a service: the load balancer's pool has "
            f"{addresses.free} of {addresses.total} free{waiting}. Stop a service you no longer "
            "use, or ask an admin to grow the pool or to serve workloads through the shared "
            "gateway (PORTAL_SERVICE_EXPOSURE=shared).")


class MountGone(AdmissionRefused):
    """A volume the launch mounts was deleted (or failed), or a dataset withdrawn or closed to
    the project, between validation and admission."""

    code = "volume_gone"


class IdempotencyKeyReused(Exception):
    """An idempotency key that came earlier with another launch request: the caller reused a
    key for a different launch (the request is refused, not answered with the first one)."""

    code = "idempotency_key_reused"


def launch_fingerprint(data: Any) -> str:
    """SHA-256 of a launch request as sent (key order and spacing aside): what an idempotency
    key is bound to. `data` is the parsed body: a dict, or a QueryDict for a form post."""
    if hasattr(data, "lists"):
        data = {key: values for key, values in data.lists()}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _launched_with_key(tenant: Tenant, user: User, key: str | None) -> Workload | None:
    """The workload an earlier request of this user in this tenant made with this key."""
    return Workload.objects.filter(tenant=tenant, owner=user, idempotency_key=key).first()


def _same_launch(existing: Workload, fingerprint: str, key: str | None) -> Workload:
    """The workload an earlier request with this key made, if this request is that one."""
    if fingerprint and existing.idempotency_fingerprint and \
            existing.idempotency_fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"The Idempotency-Key {key!r} was used for another launch request (workload "
            f"{existing.pk}); use a new key for a different request.")
    return existing


def _queue_admission_check(figures: QuotaFigures, request: dict[str, Any]) -> None:
    """With queueing on Kueue: refuse only what its queue cannot admit — more GPUs than the
    tenant's queue can hold (its quota in force plus its borrowing limit) — or more workloads
    at once, queued ones included, than the quota allows. Everything else waits its turn.

    The quota in force is Kueue's nominal quota: while maintenance withholds GPUs of the type
    from it, a launch that needs them is refused with the time they come back, as a launch
    that would cross a maintenance window is (calendars.admission)."""
    gpu_type = request["gpu_type"]
    slug, name = gpu_type.slug, figures.tenant_name
    wanted = request["gpu_count"] * request.get("nodes", 1)
    reach = figures.reach(slug)
    if reach is not None and wanted > reach:
        withheld, until = figures.withheld(slug), figures.withheld_until(slug)
        when = ("can never be admitted" if wanted > reach + withheld else
                "cannot be admitted while they are withheld"
                + (f": launch after {timezone.localtime(until, dt.UTC):%Y-%m-%d %H:%M} UTC"
                   if until else ""))
        raise AdmissionRefused(
            f"{name} can hold at most {reach} {slug} GPUs at once (its quota of "
            f"{figures.gpus(slug)}{figures.adjusted_text(slug)} plus borrowing up to "
            f"{figures.borrowing_limit}); {wanted} {when}.")
    # The total in GPU-equivalents is no limit of Kueue's: a launch that alone weighs more
    # than it could never be admitted by the portal's own rule, so it is refused now rather
    # than queued for ever; one within it queues, whatever the tenant runs meanwhile.
    weight, total = figures.equivalents(slug, wanted), figures.in_force.gpus_total
    if weight > total:
        raise AdmissionRefused(
            f"{name} has {total} GPUs in all; {wanted} {slug} weigh {equivalents_text(weight)} "
            "GPUs and can never be admitted.")
    count = (figures.used.workloads if figures.used else None) or 0
    if count + 1 > figures.max_workloads:
        raise AdmissionRefused(f"{name} has {count} of {figures.max_workloads} "
                               "workloads allowed at once (queued ones count).")


def _admission_check(tenant: Tenant, quota: Quota, request: dict[str, Any], *,
                     queued: bool = False) -> None:
    """Raise AdmissionRefused unless the tenant's quota in force leaves room for this request
    (tenants.selectors.quota_figures: raised while a reservation of the tenant runs, lowered
    while maintenance withholds GPUs of a type), against what it uses as admission counts
    (selectors.quota_use: one query, run while the tenant row is locked)."""
    figures = quota_figures(tenant, quota=quota, used=quota_use(tenant))
    if queued:
        _queue_admission_check(figures, request)
        return
    used = figures.used
    assert used is not None
    gpu_type = request["gpu_type"]
    slug, name, in_force = gpu_type.slug, tenant.name, figures.in_force
    nodes = request.get("nodes", 1)
    wanted = request["gpu_count"] * nodes  # every node's
    limit = figures.gpus(slug)
    if used.gpus(slug) + wanted > limit:
        raise AdmissionRefused(f"{name} uses {used.gpus(slug)} of {limit} {slug} GPUs"
                               f"{figures.adjusted_text(slug)}; {wanted} more would "
                               "exceed the quota.")
    # the total counts GPU-equivalents: a unit of a shared type is a part of a GPU
    weight = figures.equivalents(slug, wanted)
    if used.gpus_total + weight > in_force.gpus_total:
        raise AdmissionRefused(f"{name} uses {equivalents_text(used.gpus_total)} of "
                               f"{in_force.gpus_total} GPUs in all; "
                               f"{equivalents_text(weight)} more would exceed the quota.")
    if (used.workloads or 0) + 1 > figures.max_workloads:
        raise AdmissionRefused(f"{name} runs {used.workloads or 0} of {figures.max_workloads} "
                               "workloads allowed at once.")
    used_cpu, cpu = used.cpu or 0, request["cpu"] * nodes
    if used_cpu + cpu > in_force.cpu:
        raise AdmissionRefused(f"{name} uses {used_cpu} of {in_force.cpu} CPU cores; "
                               f"{cpu} more would exceed the quota.")
    used_memory, memory = used.memory_gb or 0, request["memory"] * nodes
    if used_memory + memory > in_force.memory_gb:
        raise AdmissionRefused(f"{name} uses {used_memory} of {in_force.memory_gb} GiB of "
                               f"memory; {memory} GiB more would exceed the quota.")


def _department_check(tenant: Tenant, request: dict[str, Any], *, queued: bool) -> None:
    """Raise DepartmentCapExceeded unless the tenant's department's cap (tenants.models.
    Department) leaves room for this request (selectors.department_refusal says why not).

    The department's row is locked after the tenant's: every launch takes the two in that
    order, and a department's removal locks its projects before it, so launches of its
    projects are serialised (and never over-admit the cap together) without two of them ever
    waiting on each other. FOR NO KEY UPDATE: it does not wait for a project being moved into
    the department (its row's foreign key takes a key-share lock of the department's)."""
    if tenant.department_id is None:
        return
    department = Department.objects.select_for_update(no_key=True).get(pk=tenant.department_id)
    refusal = department_refusal(tenant, department, slug=request["gpu_type"].slug,
                                 wanted=request["gpu_count"] * request.get("nodes", 1),
                                 queued=queued)
    if refusal is not None:
        raise DepartmentCapExceeded(refusal)


def _mounts_admit(tenant: Tenant, user: User, request: dict[str, Any]) -> list[ResolvedMount]:
    """The launch's volumes, read again under the tenant's lock (a volume deleted since the
    request was validated is refused: deletion takes the same lock), and the home volume
    where it asks for it (made now, within the storage quota, the first time); the checkpoint
    directory's volume is read again too."""
    mounts: list[ResolvedMount] = list(request.get("mounts") or [])
    checkpoint: ResolvedCheckpoint | None = request.get("checkpoint")
    volumes = [m.volume for m in mounts if m.volume is not None] + \
        ([checkpoint.volume] if checkpoint else [])
    live = set(Volume.objects.filter(pk__in=[v.pk for v in volumes], deleted_at__isnull=True)
               .exclude(state=Volume.State.FAILED).values_list("pk", flat=True))
    gone = [v.name for v in volumes if v.pk not in live]
    if gone:
        raise MountGone(f"The volume(s) {', '.join(gone)} were deleted or failed meanwhile.")
    # a dataset's row locked as its deletion and closing lock it: neither runs past this launch
    datasets = [m.dataset for m in mounts if m.dataset is not None]
    ids = [d.pk for d in datasets]
    list(Dataset.objects.select_for_update().filter(pk__in=ids).values_list("pk"))
    still = set(Dataset.objects.filter(Q(open_to_all=True) | Q(tenants=tenant), pk__in=ids)
                .values_list("pk", flat=True))
    closed = [d.name for d in datasets if d.pk not in still]
    if closed:
        raise MountGone(f"The dataset(s) {', '.join(closed)} were withdrawn or closed to "
                        f"{tenant.name} meanwhile.")
    if request.get("use_home"):
        try:
            home = volume_home_ensure(tenant=tenant, user=user)
        except StorageQuotaExceeded as exc:
            raise AdmissionRefused(f"The home volume cannot be made: {exc}") from exc
        mounts.append(ResolvedMount(volume=home, path=HOME_MOUNT_PATH, read_only=False))
    return mounts


def workload_launch(*, tenant: Tenant, user: User, request: dict[str, Any],
                    idempotency_key: str | None = None,
                    request_fingerprint: str = "") -> tuple[Workload, bool]:
    """Admit a validated launch request (LaunchSerializer's data) and queue its creation.

    Returns (workload, created). With an idempotency key, the same key from the same user in
    the same tenant returns the workload the first request made, and launches nothing new;
    the same key with another request (`request_fingerprint`, `launch_fingerprint` of the body
    as sent) raises IdempotencyKeyReused.
    """
    if idempotency_key:
        existing = _launched_with_key(tenant, user, idempotency_key)
        if existing is not None:
            return _same_launch(existing, request_fingerprint, idempotency_key), False
    try:
        _address_check(request)  # before the lock: it may ask the cluster (every 10 s)
    except AdmissionRefused:
        metrics.admission_refused(gpu_type=request["gpu_type"].slug)
        raise
    try:
        # before the lock: it may ask the cluster its objects go to (once a minute): a batch
        # launch on a worker is queued by the home cluster's Kueue, which dispatches it
        queued = queueing_on(Kube(cluster=objects_cluster(request["kind"],
                                                          request.get("cluster") or "")))
    except KubeError:
        queued = False  # not known now: the stricter rule of the two admits it
    try:
        with transaction.atomic():
            tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
            if idempotency_key:
                # claimed again under the tenant's lock: a request with the same key that
                # committed while this one waited for the lock has its workload counted in
                # the quota now, and this one must answer with it, not be refused by it
                existing = _launched_with_key(tenant, user, idempotency_key)
                if existing is not None:
                    return _same_launch(existing, request_fingerprint, idempotency_key), False
            if not tenant.is_active:
                raise AdmissionRefused(f"{tenant.name} is being deleted; nothing can be launched.")
            quota = Quota.objects.get(tenant=tenant)
            _admission_check(tenant, quota, request, queued=queued)
            _department_check(tenant, request, queued=queued)
            for check in ADMISSION_CHECKS:  # the apps above's (hooks.py), in its order
                check(tenant=tenant, user=user, request=request)
            mounts = _mounts_admit(tenant, user, request)
            template = request["template"]
            workload = Workload.objects.create(
                tenant=tenant, owner=user, name=request["name"], template=template,
                kind=request["kind"], gpu_type=request["gpu_type"],
                cluster=request.get("cluster") or home_cluster_name(),
                gpu_count=request["gpu_count"], nodes=request.get("nodes", 1),
                image=request["image"],
                command=request.get("command") or [], args=request.get("args") or [],
                env=request.get("env") or {}, port=request.get("port"), cpu=request["cpu"],
                memory_gb=request["memory"],
                max_runtime_minutes=request.get("max_runtime_minutes") or None,
                retries=request.get("retries") or 0, use_home=request.get("use_home", False),
                ssh=bool(request.get("ssh")),
                access_token=secrets.token_urlsafe(32) if template.token_env else "",
                idempotency_key=idempotency_key or None,
                idempotency_fingerprint=request_fingerprint if idempotency_key else "",
            )
            # a group's pods add its replicated job and ranks to its name (JobSet's limit)
            workload.object_name = workload_object_name(
                workload.pk, workload.name,
                **({"max_length": MAX_GROUP_OBJECT_NAME} if template.distributed else {}))
            # what it will run, frozen now: later edits of the template or GPU type leave it be
            checkpoint = request.get("checkpoint")
            workload.launch_spec = launch_spec_from_rows(
                workload, avoid_nodes=request.get("avoid_nodes") or (),
                secrets=request.get("secrets") or (),
                mounts=[mount.as_spec(tenant) for mount in mounts
                        if mount.path != HOME_MOUNT_PATH],
                checkpoint=checkpoint.as_spec(workload.object_name) if checkpoint else None)
            workload.save(update_fields=["object_name", "launch_spec"])
            if checkpoint is not None:
                # its volume is mounted like the others: listed with them, and no deletion
                # of the volume while the job lives (VOLUME_USERS)
                mounts.append(ResolvedMount(volume=checkpoint.volume, read_only=False,
                                            path=CHECKPOINT_MOUNT_PATH))
            WorkloadMount.objects.bulk_create(
                WorkloadMount(workload=workload, volume=mount.volume, dataset=mount.dataset,
                              volume_name=mount.name, claim_name=mount.claim_name,
                              path=mount.path, read_only=mount.read_only) for mount in mounts)
            if workload.kind == Template.Kind.SERVICE or workload.ssh:
                # its OAuth client: the authenticating proxy in front of it logs users in (a
                # batch job's, with SSH, admits only SSH)
                workload_access_create(workload=workload, actor=user,
                                       public=bool(request.get("public")))
            workload_event(workload=workload, reason="Submitted",
                           message=f"{user.label} launched {template.slug} on "
                                   f"{workload.gpus_text}")
            audit_record(actor=user, action="workload.launch", tenant=tenant,
                         target=workload.object_name,
                         after={"id": workload.pk, "template": template.slug,
                                "gpu_type": workload.gpu_type.slug,
                                "gpu_count": workload.gpu_count, "nodes": workload.nodes,
                                "image": workload.image,
                                "secrets": [use.name for use in request.get("secrets") or ()]})
            send_on_commit("workloads.tasks.workload_create_task", workload.pk)
    except AdmissionRefused:
        metrics.admission_refused(gpu_type=request["gpu_type"].slug)
        raise
    except IntegrityError:
        # the same idempotency key raced in from a concurrent request: return its workload
        # (without a key, no earlier launch is this one: `idempotency_key=None` would match
        # every keyless launch of the user)
        existing = _launched_with_key(tenant, user, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        return _same_launch(existing, request_fingerprint, idempotency_key), False
    metrics.launch_admitted(template=workload.template.slug, gpu_type=workload.gpu_type.slug)
    return workload, True


def workload_stop(*, workload: Workload, user: User | None, reason: str = "") -> Workload:
    """Stop a workload: its objects go, its record and history stay."""
    with transaction.atomic():
        workload = Workload.objects.select_for_update().get(pk=workload.pk)
        if workload.state not in STOPPABLE:
            return workload
        before = workload.state
        reason = reason or f"stopped by {getattr(user, 'label', 'the portal')}"
        workload_transition(workload=workload, allowed_from=STOPPABLE,
                            to=Workload.State.STOPPING, reason=reason,
                            event={"reason": "Stopping", "message": reason},
                            stop_requested_at=timezone.now())
        audit_record(actor=user, action="workload.stop", tenant=workload.tenant,
                     target=workload.object_name, before={"state": before},
                     after={"state": workload.state, "reason": workload.reason})
        if user is None or user.pk != workload.owner_id:
            # the owner hears of a stop they did not make (the portal's: idle, runtime limit,
            # budget; a manager's)
            notify_owner(workload, kind="stopped", key=f"stopped:{workload.pk}",
                         title=f"{workload.name} (#{workload.pk}) was stopped",
                         text=f"{workload.name} in {workload.tenant.name}: {reason}")
        send_on_commit("workloads.tasks.workload_stop_task", workload.pk)
    return workload


REQUEUE_KEY = "requeue-of-{}"  # the idempotency key of the copy that replaces a requeued run


def workload_requeue(*, workload: Workload, reason: str,
                     avoid_nodes: list[str] | tuple[str, ...] = ()) -> Workload | None:
    """Put a running batch workload back in line elsewhere or later (a maintenance drain): the
    run is stopped with `reason`, and a copy of it — its frozen launch spec, the same owner,
    name and tenant, kept off `avoid_nodes` — is submitted in the same transaction, in place
    of the stopped one: no admission check (it held its admission already; under Kueue it
    waits its turn again). Once per run: the copy's idempotency key names the run, so a
    retried drain finds the copy it made. Returns the copy, or None when the run was not
    live (stopped or finished meanwhile) and no copy was made."""
    key = REQUEUE_KEY.format(workload.pk)
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=workload.tenant_id)  # as a launch does
        copy = Workload.objects.filter(tenant=workload.tenant_id, owner=workload.owner_id,
                                       idempotency_key=key).first()
        if copy is not None:
            return copy
        current = Workload.objects.select_related("template", "gpu_type", "tenant", "owner") \
            .get(pk=workload.pk)
        if current.state not in STOPPABLE:
            return None
        copy = Workload.objects.create(
            tenant=current.tenant, owner=current.owner, name=current.name,
            template=current.template, kind=current.kind, gpu_type=current.gpu_type,
            gpu_count=current.gpu_count, nodes=current.nodes, image=current.image,
            command=current.command, args=current.args, env=current.env, port=current.port,
            cpu=current.cpu, memory_gb=current.memory_gb,
            max_runtime_minutes=current.max_runtime_minutes, retries=current.retries,
            use_home=current.use_home, ssh=current.ssh,
            access_token=secrets.token_urlsafe(32) if current.access_token else "",
            idempotency_key=key)
        copy.object_name = workload_object_name(
            copy.pk, copy.name,
            **({"max_length": MAX_GROUP_OBJECT_NAME} if current.template.distributed else {}))
        spec = current.launch_spec or launch_spec_from_rows(current)
        avoid = sorted(set(spec.get("avoid_nodes") or ()) | set(avoid_nodes))
        copy.launch_spec = {**spec, "avoid_nodes": avoid}
        copy.save(update_fields=["object_name", "launch_spec"])
        # its volumes stay mounted: the stopped run's mounts go with the copy
        WorkloadMount.objects.bulk_create(
            WorkloadMount(workload=copy, volume_id=m.volume_id, dataset_id=m.dataset_id,
                          volume_name=m.volume_name,
                          claim_name=m.claim_name, path=m.path, read_only=m.read_only)
            for m in current.mounts.all())
        if copy.ssh:
            workload_access_create(workload=copy, actor=None, public=False)
        workload_stop(workload=current, user=None,
                      reason=f"{reason} It was put back in line as #{copy.pk}.")
        workload_event(workload=copy, reason="Submitted",
                       message=f"requeued from #{current.pk}: {reason}")
        audit_record(actor=None, action="workload.requeue", tenant=current.tenant,
                     target=copy.object_name,
                     before={"id": current.pk, "state": current.state},
                     after={"id": copy.pk, "avoid_nodes": avoid})
        send_on_commit("workloads.tasks.workload_create_task", copy.pk)
    return copy


def workload_delete(*, workload: Workload, user: User) -> None:
    """Remove a workload from the lists; a live one is stopped first (the stop deletes its
    objects). A finished one's objects go at once too: a batch workload's Job and pod, which
    carry its environment, would otherwise stay until the Job's TTL. Its history is kept for
    accounting (the row is marked deleted, not removed)."""
    workload = workload_stop(workload=workload, user=user, reason=f"deleted by {user.label}")
    with transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(deleted_at=timezone.now())
        audit_record(actor=user, action="workload.delete", tenant=workload.tenant,
                     target=workload.object_name, after={"id": workload.pk})
        if workload.state in Workload.FINAL_STATES:
            send_on_commit("workloads.tasks.workload_remove_objects_task", workload.pk)


def workload_launch_spec_freeze(*, workload: Workload) -> None:
    """Freeze the launch spec of a workload admitted without one (by a portal older than the
    frozen spec, during an upgrade): from its template and GPU type as they are now, once."""
    spec = launch_spec_from_rows(workload)
    if Workload.objects.filter(pk=workload.pk, launch_spec={}).update(launch_spec=spec):
        workload.launch_spec = spec
    else:
        workload.refresh_from_db(fields=["launch_spec"])


def workloads_stop_for_tenant(*, tenant: Tenant, user: Any, reason: str) -> int:
    """Stop every live workload of a tenant (it is being deleted): the entry of tenants'
    TENANT_DELETING hook (registered in apps.py). Returns how many it stopped."""
    live = Workload.objects.filter(tenant=tenant, state__in=Workload.ACTIVE_STATES)
    count = 0
    for workload in live:
        workload_stop(workload=workload, user=user, reason=reason)
        count += 1
    return count
