"""Where queued workloads stand: their place in Kueue's queue and the portal's estimate of when
they start.

- Position: Kueue's visibility API, one request per tenant queue, remembered a few seconds
  (`pending_in_queue`).
- Estimate: eta.py plays each GPU type's queue forward. The running workloads end at their
  maximum runtime, or after the typical duration of similar finished workloads (the median of
  the last ones of the same template and GPU type in the tenant, else in every tenant); the
  queue is every tenant's queued workloads of that type in Kueue's order within a queue
  (priority, then age), each tenant held to its reach (nominal quota plus borrowing limit).
  The calendar's blocks (maintenance windows, other tenants' reservations) come from the
  entries of hooks.CAPACITY_BLOCKS (calendars, which this app cannot import): a run that
  cannot fit beside one starts after it.
- Why it waits: the last of Kueue's events on its Kueue Workload that the tracker recorded as
  the workload's events ("Pending" with the scheduler's message, "Preempted", "Evicted"), in
  the portal's words and Kueue's own text, redacted (kueue_reason.py): read from the database,
  no request to the cluster; where Kueue's Workloads were listed for the positions (no
  visibility API), from their conditions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import re
import statistics
from collections.abc import Hashable, Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from catalogue.models import GpuType
from cluster.capacity import gpu_capacity
from clusters.models import home_cluster_name
from kube.client import Kube, KubeError
from kube.multikueue import local_queue_name
from tenants.kueue import INTERACTIVE, LOCAL_QUEUE, PRIORITIES, priority_class
from tenants.models import Tenant
from tenants.selectors import quota_figures, tenants_with_quota_figures
from workloads.eta import HISTORY, LIMIT, UNKNOWN, Block, Estimate, Holder, Waiter, estimate_starts
from workloads.hooks import CAPACITY_BLOCKS
from workloads.kueue_reason import PASSED, WAITING, KueueReason, from_events, from_workload
from workloads.models import Workload, WorkloadEvent
from workloads.objects import dispatched_to

log = logging.getLogger(__name__)

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
POSITIONS_SECONDS = 5
HISTORY_SAMPLES = 20
HISTORY_LEAST = 3
WORKLOAD_ID = re.compile(r"^wl-(\d+)-")  # the portal's object names (workloads/naming.py)


def capacity_blocks(gpu_type: GpuType, now: dt.datetime) -> list[Block]:
    """Every entry's blocks of the type from `now` on (hooks.CAPACITY_BLOCKS)."""
    return [block for supplier in CAPACITY_BLOCKS for block in supplier(gpu_type, now)]


@dataclasses.dataclass(frozen=True)
class QueuePlace:
    position: int | None      # 1 = next; None: Kueue does not list it (yet)
    length: int               # workloads waiting in the tenant's queue
    eta: dt.datetime | None
    eta_basis: str
    reason: str = ""          # why Kueue holds it, in the portal's words ("" : not said)
    kueue_message: str = ""   # Kueue's own text, without other tenants' names


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions: list[dict[str, Any]] = (obj.get("status") or {}).get("conditions") or []
    for condition in conditions:
        if condition.get("type") == kind:
            return condition
    return None


def pending_order(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kueue's Workloads that wait (no quota reserved, not finished), in the order a StrictFIFO
    queue admits them: higher priority first, then the older; a preempted one queues again from
    when it was evicted (Kueue's default requeuing timestamp)."""
    def waiting(workload: dict[str, Any]) -> bool:
        return not any((_condition(workload, kind) or {}).get("status") == "True"
                       for kind in ("QuotaReserved", "Finished"))

    def key(workload: dict[str, Any]) -> tuple[int, str, int, str]:
        evicted = _condition(workload, "Evicted") or {}
        since = evicted.get("lastTransitionTime") or \
            workload["metadata"].get("creationTimestamp") or ""
        # timestamps have whole seconds: launches of the same second in the portal's order
        launched = WORKLOAD_ID.search(owner_name(workload))
        return (-int((workload.get("spec") or {}).get("priority") or 0), since,
                int(launched.group(1)) if launched else 0, workload["metadata"].get("name", ""))

    return sorted((w for w in workloads if waiting(w)), key=key)


def pending_in_queue(namespace: str, kube: Kube | None = None, *,
                     local_queue: str = LOCAL_QUEUE,
                     remembered: bool = True) -> list[dict[str, Any]]:
    """The pending Kueue Workloads of a tenant's queue (`local_queue` in `namespace`, in the
    cluster `kube` reaches), in order ([] when Kueue cannot say): from Kueue's visibility API,
    or where it is not served, from the Workloads themselves. `remembered=False`: asked afresh
    and not remembered (a launch just created, which a list remembered a moment ago lacks, and
    which Kueue may not list yet either)."""
    kube = kube or Kube()
    key = f"queueing:pending:{namespace}"  # the home cluster's own queue: as it always was
    if kube.cluster is not None or local_queue != LOCAL_QUEUE:
        key += f":{kube.cluster or ''}:{local_queue}"
    known: list[dict[str, Any]] | None = _cached(key) if remembered else None
    if known is not None:
        return known
    try:
        body = kube.server_get(
            f"{VISIBILITY}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads")
        items: list[dict[str, Any]] = json.loads(body).get("items") or []
        items.sort(key=lambda item: item.get("positionInLocalQueue", 0))
    except (KubeError, ValueError) as exc:
        try:
            items = pending_order([
                w for w in kube.list("Workload", namespace).get("items") or []
                if (w.get("spec") or {}).get("queueName", LOCAL_QUEUE) == local_queue])
        except KubeError:
            log.info("queue positions of %s unknown: %s", namespace, exc)
            return []
    if remembered:
        with contextlib.suppress(Exception):  # a cache outage costs a request, never the answer
            cache.set(key, items, POSITIONS_SECONDS)
    return items


def _cached(key: str) -> Any:
    try:
        return cache.get(key)
    except Exception:  # noqa: BLE001 - Redis restarting: ask Kueue instead
        return None


def owner_name(pending: dict[str, Any]) -> str:
    """The name of the Job, pod, JobSet or MPIJob a pending Kueue Workload stands for (a
    group's one Workload is owned by its JobSet or MPIJob, named as the workload is)."""
    owners = (pending.get("metadata") or {}).get("ownerReferences") or []
    return owners[0].get("name", "") if owners else ""


def _matches(object_name: str, owner: str) -> bool:
    # a Job is named as the workload's objects are; a Deployment's pods add "-<hash>-<id>"
    return owner == object_name or owner.startswith(object_name + "-")


def queue_sites(workload: Workload) -> list[tuple[str | None, str]]:
    """Where a queued workload waits, as (cluster: None for the home one, LocalQueue), in the
    order it passes them. A batch job dispatched to worker W waits in the home cluster's queue
    pinned to W until the home cluster reserves its quota, then (MultiKueue made its copy) in
    W's queue of the same name, for W's GPUs; a service placed on W in W's own queue; the rest
    in the home cluster's."""
    worker = dispatched_to(workload)
    if worker is not None:
        return [(None, local_queue_name(worker)), (worker, local_queue_name(worker))]
    if workload.cluster != home_cluster_name():
        return [(workload.cluster, LOCAL_QUEUE)]
    return [(None, LOCAL_QUEUE)]


def _stands_for(pending: dict[str, Any], object_name: str) -> bool:
    """Whether a pending Kueue Workload is the workload's (named `object_name`): by its owner,
    or, for a copy MultiKueue made whose owner is not set yet, by its own name (Kueue names a
    Job's Workload `job-<the Job's name>-<hash>`)."""
    name = (pending.get("metadata") or {}).get("name", "")
    return _matches(object_name, owner_name(pending)) or f"-{object_name}-" in name


def positions(workloads: Iterable[Workload], kube: Kube | None = None, *, remembered: bool = True
              ) -> dict[int, tuple[int | None, int, dict[str, Any] | None]]:
    """workload id → (position from 1, queue length, the pending entry that stands for it), for
    queued workloads, each asked of the cluster that queues it (`queue_sites`; `kube`: the home
    cluster's client). The entry is Kueue's Workload itself, with its conditions, where the
    visibility API is not served."""
    asked: dict[tuple[str | None, str, str], list[dict[str, Any]]] = {}

    def pending(cluster: str | None, namespace: str, queue: str) -> list[dict[str, Any]]:
        key = (cluster, namespace, queue)
        if key not in asked:
            client = kube if cluster is None else Kube(cluster=cluster)
            asked[key] = pending_in_queue(namespace, client, local_queue=queue,
                                          remembered=remembered)
        return asked[key]

    result: dict[int, tuple[int | None, int, dict[str, Any] | None]] = {}
    for workload in workloads:
        found: tuple[int | None, int, dict[str, Any] | None] = (None, 0, None)
        for cluster, queue in queue_sites(workload):
            waiting = pending(cluster, workload.tenant.namespace, queue)
            place = next((i for i, entry in enumerate(waiting)
                          if _stands_for(entry, workload.object_name)), None)
            found = ((None, len(waiting), None) if place is None
                     else (place + 1, len(waiting), waiting[place]))
            if place is not None:
                break
        result[workload.pk] = found
    return result


def typical_seconds(template_id: int, gpu_type_id: int, tenant_id: int) -> float | None:
    """The median duration of the last similar finished workloads (the tenant's own first)."""
    finished = Workload.objects.filter(
        template_id=template_id, gpu_type_id=gpu_type_id, state=Workload.State.SUCCEEDED,
        started_at__isnull=False, finished_at__isnull=False)
    for scope in (finished.filter(tenant_id=tenant_id), finished):
        spans = [(end - start).total_seconds() for start, end in
                 scope.order_by("-finished_at").values_list("started_at", "finished_at")
                 [:HISTORY_SAMPLES] if start is not None and end is not None]  # (both filtered)
        if len(spans) >= HISTORY_LEAST:
            return statistics.median(spans)
    return None


def _expected(workload: Workload, memo: dict[tuple[int, int, int], float | None]
              ) -> tuple[float | None, str]:
    if workload.max_runtime_minutes:
        return workload.max_runtime_minutes * 60.0, LIMIT
    key = (workload.template_id, workload.gpu_type_id, workload.tenant_id)
    if key not in memo:
        memo[key] = typical_seconds(*key)
    return (memo[key], HISTORY) if memo[key] is not None else (None, UNKNOWN)


def estimates(gpu_type: GpuType, *, capacity: int, now: dt.datetime | None = None,
              cluster: str | None = None) -> dict[int, Estimate]:
    """workload id → the estimated start of every queued workload of one GPU type on one
    cluster (None: the home one; `capacity`: its GPUs of the type)."""
    now = now or timezone.now()
    memo: dict[tuple[int, int, int], float | None] = {}
    live = Workload.objects.filter(gpu_type=gpu_type, deleted_at__isnull=True,
                                   cluster=cluster or home_cluster_name())
    running = []
    for workload in live.filter(state__in=[Workload.State.RUNNING, Workload.State.PENDING,
                                           Workload.State.STOPPING]):
        if workload.expires_at:
            running.append(Holder(workload.tenant_id, workload.gpu_total, workload.expires_at))
            continue
        seconds, source = _expected(workload, memo)
        started = workload.started_at or now
        ends = None if seconds is None else started + dt.timedelta(seconds=seconds)
        running.append(Holder(workload.tenant_id, workload.gpu_total, ends, source))
    queued = list(live.filter(state=Workload.State.QUEUED))
    rank = {name: value for name, (value, _) in PRIORITIES.items()}
    queued.sort(key=lambda w: (-rank.get(priority_class(w.kind), rank[INTERACTIVE]),
                               w.created_at, w.pk))
    waiters: list[Waiter[int]] = []
    for workload in queued:
        seconds, source = _expected(workload, memo)
        # a group is one entry holding every GPU of every rank (Kueue admits it whole)
        waiters.append(Waiter(workload.pk, workload.tenant_id, workload.gpu_total, seconds, source))
    tenants = {w.tenant_id for w in queued}
    reach: dict[Hashable, int] = {}
    for tenant in tenants_with_quota_figures(Tenant.objects.filter(pk__in=tenants,
                                                                   quota__isnull=False)):
        limit = quota_figures(tenant, now=now).reach(gpu_type.slug)
        if limit is not None:
            reach[tenant.pk] = limit
    return estimate_starts(now=now, capacity=capacity, reach=reach, running=running,
                           queue=waiters, blocks=capacity_blocks(gpu_type, now))


def cohort_quota(gpu_type: GpuType) -> int:
    """What the cohort can admit of a GPU type at most: the sum of the tenants' quotas of it in
    force — their ClusterQueues' nominal quotas (Kueue lends only what some tenant's quota
    holds, however many GPUs the cluster has)."""
    tenants = tenants_with_quota_figures(Tenant.objects.exclude(
        state__in=[Tenant.State.DELETING, Tenant.State.DELETED]).filter(quota__isnull=False))
    return sum(quota_figures(tenant).gpus(gpu_type.slug) for tenant in tenants)


def kueue_reasons(workloads: Iterable[Workload]) -> dict[int, KueueReason]:
    """workload id → why Kueue holds it, from the last of Kueue's events on its Kueue Workload
    among the workload's events (one query; the tracker records them as they come)."""
    namespaces = {w.pk: w.tenant.namespace for w in workloads}
    if not namespaces:
        return {}
    said: dict[int, list[tuple[str, str]]] = {}
    for workload_id, reason, message in (
            WorkloadEvent.objects.filter(
                Q(reason__in=sorted(WAITING | PASSED)) | Q(reason__startswith="Evicted"),
                workload_id__in=list(namespaces), source__icontains="kueue")
            .order_by("workload_id", "at", "pk").values_list("workload_id", "reason", "message")):
        said.setdefault(workload_id, []).append((reason, message))
    result = {}
    for workload_id, events in said.items():
        why = from_events(events, frozenset({namespaces[workload_id]}))
        if why is not None:
            result[workload_id] = why
    return result


def queue_places(workloads: Iterable[Workload], kube: Kube | None = None, *,
                 remembered: bool = True) -> dict[int, QueuePlace]:
    """workload id → its QueuePlace, for the queued ones among `workloads` (`remembered`:
    pending_in_queue's)."""
    queued = [w for w in workloads if w.state == "queued"]
    if not queued:
        return {}
    places = positions(queued, kube, remembered=remembered)
    reasons = kueue_reasons(queued)
    home = home_cluster_name()
    capacities: dict[str, dict[str, Any]] = {}
    by_type: dict[tuple[int, str], dict[int, Estimate]] = {}
    result = {}
    for workload in queued:
        # the GPUs it waits for are those of the cluster it runs on (a dispatched job's
        # worker's), and so are the workloads ahead of it
        cluster, gpu_type = workload.cluster, workload.gpu_type
        if cluster not in capacities:
            try:
                capacities[cluster] = dict(gpu_capacity(cluster=None if cluster == home
                                                        else cluster))
            except KubeError:
                capacities[cluster] = {}
        key = (gpu_type.pk, cluster)
        if key not in by_type:
            pool = capacities[cluster].get(gpu_type.slug)
            by_type[key] = estimates(gpu_type, capacity=min(
                pool.allocatable if pool else 0, cohort_quota(gpu_type)),
                cluster=None if cluster == home else cluster)
        estimate = by_type[key].get(workload.pk)
        position, length, entry = places.get(workload.pk, (None, 0, None))
        # Kueue's Workload itself where it was listed (no visibility API): its conditions
        why = (from_workload(entry, frozenset({workload.tenant.namespace}))
               if entry and "status" in entry else None) or reasons.get(workload.pk)
        result[workload.pk] = QueuePlace(
            position=position, length=length,
            eta=estimate.start if estimate else None,
            eta_basis=estimate.basis if estimate else "no estimate",
            reason=why.reason if why else "", kueue_message=why.message if why else "")
    return result


def _wait_text(seconds: float) -> str:
    minutes = max(round(seconds / 60), 1)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def queue_text(workload: Workload, place: QueuePlace | None, now: dt.datetime | None = None) -> str:
    """"queued — position 3 of 7 for a100, about 40 min", or why there is no estimate (the
    pages; gpuctl words it the same from the API's fields)."""
    text = "queued"
    if place is None:
        return text
    if place.position:
        text += f" — position {place.position} of {place.length} for {workload.gpu_type.slug}"
    if place.eta is not None:
        wait = (place.eta - (now or timezone.now())).total_seconds()
        text += f", about {_wait_text(wait)}" if wait > 30 else ", starting now"
    elif place.eta_basis:
        text += f"; {place.eta_basis}"
    return text


def annotate_queue(workloads: Iterable[Any]) -> None:
    """Set `queue_text` and `queue_place` on each queued workload of a page (one place lookup
    for all)."""
    workloads = list(workloads)
    places = queue_places(workloads)
    for workload in workloads:
        queued = workload.state == "queued"
        workload.queue_place = places.get(workload.pk) if queued else None
        workload.queue_text = queue_text(workload, workload.queue_place) if queued else ""
