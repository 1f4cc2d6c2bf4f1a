"""Maintenance windows from announcement to the end.

- Placement (`launch_placement`): from the moment a window is announced, a launch whose maximum
  runtime (the launch's, else its quota's, else none) would still run at a live window's start
  is kept off that window's nodes (admission.py puts them in the launch spec; its pods get a
  required node affinity), and refused when the type's other nodes cannot hold it at all.
- Notices (`window_announce`, and the beat's 24 h and 1 h ones): the owners of live workloads
  that would still run at the start on the covered nodes (or, not on a node yet, of a covered
  GPU type and not kept off them), each once (notify()'s keys
  `maintenance:<window>:<notice>:<workload>`).
- The beat (`windows_advance`, every minute): a cancelled future window is called off (those
  told are told it is off); at the start the nodes are resolved again and cordoned (annotation
  `maintenance-<id>`; a node someone else cordoned is left as it is and not recorded), and with
  `drain` every workload with a pod on them is stopped through the stop path; a window with a
  re-layout then relabels each node once its GPUs are free and reads it until the layout is
  applied (relayout.py); at the end (or the window cancelled while in progress: its end is
  then) the nodes still cordoned by it are uncordoned, but for those whose re-layout was not
  applied.

Each step claims or records its column with a conditional UPDATE and acts idempotently: a node
is cordoned or uncordoned only when its annotation says it is not done yet (a conditional
patch: a 409 re-reads it), workload_stop is a no-op on a stopping workload, notify() tells each
user once per key. A retried, concurrent or killed-and-restarted run does nothing twice.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import Q
from django.utils import timezone

from catalogue.models import GpuType, Template
from cluster.cache import cluster_cache
from cluster.capacity import cluster_nodes
from kube.client import Conflict, Kube, KubeError, NotFound
from kube.kueue import queueing_on
from kube.labels import LABEL_WORKLOAD_ID
from notifications.models import Kind, Notification
from notifications.services import notify
from tenants.figures import AdjustmentLine
from tenants.models import Quota, QuotaAdjustment, Tenant
from tenants.selectors import quota_figures, tenants_adjusted_by, tenants_with_quota_figures
from tenants.services import quota_adjustments_set
from workloads.journal import notify_owner
from workloads.launch_spec import launch_spec_of
from workloads.models import Workload
from workloads.services import workload_requeue, workload_stop

from .cordons import cordoned_by, node_cordon, node_uncordon
from .models import MaintenanceWindow
from .relayout import relayout_advance, relayout_finish
from .selectors import (
    MAINTENANCE_CORDON_PREFIX,
    down_intervals,
    live_windows,
    type_capacity,
    type_nodes,
    window_node_names,
    window_nodes,
)
from .timeline import Interval, crosses, shares

log = logging.getLogger(__name__)
Obj = dict[str, Any]
State = MaintenanceWindow.State
NOTICE_24H = dt.timedelta(hours=24)
NOTICE_1H = dt.timedelta(hours=1)
# what a notice is about: live workloads, and those about to be (admitted, not yet created)
TOLD_STATES = (Workload.State.SUBMITTED, Workload.State.CREATING, Workload.State.QUEUED,
               Workload.State.PENDING, Workload.State.RUNNING)


# --- words -----------------------------------------------------------------------------------

def when_text(at: dt.datetime) -> str:
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def duration_text(delta: dt.timedelta) -> str:
    """"45 min", "2 h 10 min" (whole minutes, rounded down)."""
    minutes = max(int(delta.total_seconds() // 60), 0)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def window_text(window: MaintenanceWindow) -> str:
    """"maintenance #3 (driver update) of gpu-a100-0, gpu-a100-1 from 2026-11-21 14:00 UTC to
    2026-11-21 18:00 UTC"."""
    return (f"maintenance #{window.pk} ({window.reason}) of {window.target_text} from "
            f"{when_text(window.start)} to {when_text(window.end)}")


def cordon_mark(window: MaintenanceWindow) -> str:
    return f"{MAINTENANCE_CORDON_PREFIX}{window.pk}"


# --- placement of launches -------------------------------------------------------------------

def runtime_seconds(max_runtime_minutes: int | None, quota: Quota | None) -> float | None:
    """The longest a launch may run: its own limit, else its quota's, else none (None)."""
    minutes = max_runtime_minutes or (quota.max_runtime_minutes if quota is not None else 0)
    return minutes * 60 if minutes else None


def covered_nodes(window: MaintenanceWindow, nodes: list[Obj] | None,
                  matched: dict[Any, set[str]] | None = None) -> set[str]:
    """The nodes a window covers: as resolved when announced (or at its start), and as the
    cluster's nodes match it now (`nodes` None: the cluster is not known now). `matched`: what
    the nodes matched for the windows of the same target already looked at (a launch checks
    every live window against the same nodes: every node is matched once per target, not once
    per window)."""
    names = set(window.affected or {})
    if nodes is not None:
        by_type = window.gpu_type
        target = (tuple(window.nodes or ()), tuple(sorted((window.node_selector or {}).items())),
                  _type_key(by_type) if by_type is not None else None)
        found = matched.get(target) if matched is not None else None
        if found is None:
            found = window_node_names(window, nodes)
            if matched is not None:
                matched[target] = found
        names |= found
    return names


def _type_key(gpu_type: GpuType) -> tuple[Any, ...]:
    """What matching a node against a GPU type reads of the type."""
    return (gpu_type.slug, gpu_type.resource_name,
            tuple(sorted((gpu_type.node_selector or {}).items())))


def nodes_matched() -> tuple[list[Obj] | None, dict[Any, Any]]:
    """The cluster's nodes now (None: not known now) and what was matched against this very
    copy of them already (a GPU type's nodes, a window target's), kept in the read model
    until its nodes change: the launch check runs at every keystroke, and matching every
    node against every live window each time was most of its cost."""
    try:
        cache = cluster_cache()
        cache.ready(cache.nodes)
        version, nodes = cache.nodes.snapshot()
    except KubeError:
        return None, {}
    return nodes, cache.memo("calendars.nodes_matched", version, dict)


@dataclasses.dataclass(frozen=True)
class Placement:
    avoid: tuple[str, ...] = ()  # the nodes it must keep off
    windows: tuple[MaintenanceWindow, ...] = ()  # the windows it would cross, on its type
    refusal: str = ""  # why no other node can hold it ("": one can)
    # what is outside the windows: no node of the type can hold it / not enough GPUs in all
    never: bool = False


def _pool_fits(pool: dict[str, int], per_node: int, nodes: int) -> bool:
    return sum(1 for gpus in pool.values() if gpus >= per_node) >= nodes


def _refusal(windows: list[MaintenanceWindow], *, gpu_type: GpuType, outside: dict[str, int],
             per_node: int, nodes: int, seconds: float | None, now: dt.datetime) -> str:
    slug = gpu_type.slug
    named = "; ".join(window_text(w) for w in windows)
    runtime = (f"its maximum runtime of {duration_text(dt.timedelta(seconds=seconds))}"
               if seconds is not None else "it has no maximum runtime, so it")
    if not outside:
        why = f"no other {slug} node is in service"
    elif nodes > 1:
        able = sum(1 for gpus in outside.values() if gpus >= per_node)
        why = (f"{able} other {slug} node{'s' if able != 1 else ''} can hold {per_node} GPUs "
               f"each, and it needs {nodes}")
    else:
        why = (f"the other {slug} nodes have at most {max(outside.values())} GPUs each "
               f"({sum(outside.values())} in all), and it needs {per_node} on one node")
    first_start = min(w.start for w in windows)
    last_end = max(w.end for w in windows)
    ways = []
    if first_start - now >= dt.timedelta(minutes=1):
        ways.append(f"set a maximum runtime under {duration_text(first_start - now)}")
    ways.append(f"launch after {when_text(last_end)}")
    return (f"It would still be running at the start of {named}: {runtime} would cross it, "
            f"and {why}. To run it, {' or '.join(ways)}.")


def launch_placement(*, gpu_type: GpuType, gpus_per_node: int, nodes: int = 1,
                     seconds: float | None, now: dt.datetime | None = None,
                     windows: list[MaintenanceWindow] | None = None) -> Placement:
    """Where a launch of `nodes` × `gpus_per_node` GPUs of `gpu_type` that may run `seconds`
    (None: no limit) from now may go: the nodes of the live windows it would cross, and why
    it cannot run at all when the type's other nodes could never hold it (while all of them
    could: a launch too big for the cluster anyway is not the windows' business)."""
    now = now or timezone.now()
    windows = live_windows(now) if windows is None else windows
    crossing = [w for w in windows if crosses(now, seconds, Interval(w.start, w.end, 0))]
    if not crossing:
        return Placement()
    # the cluster not known now: avoid what the windows resolved to, refuse nothing
    cluster, matched = nodes_matched()
    inside: dict[str, int] = {}
    if cluster is not None:
        key = ("type", _type_key(gpu_type))
        if key not in matched:
            matched[key] = type_nodes(gpu_type, cluster)
        inside = matched[key]
    avoid: set[str] = set()
    hit = []
    for window in crossing:
        covered = covered_nodes(window, cluster, matched)
        of_type = {name for name, entry in (window.affected or {}).items()
                   if entry.get("gpu_type") == gpu_type.slug} | (covered & set(inside))
        if of_type:
            hit.append(window)
            avoid |= covered
    if not hit:
        return Placement()
    outside = {name: gpus for name, gpus in inside.items() if name not in avoid}
    refusal, never = "", False
    if cluster is not None and _pool_fits(inside, gpus_per_node, nodes) and \
            not _pool_fits(outside, gpus_per_node, nodes):
        refusal = _refusal(hit, gpu_type=gpu_type, outside=outside, per_node=gpus_per_node,
                           nodes=nodes, seconds=seconds, now=now)
        never = sum(outside.values()) < gpus_per_node * nodes
    return Placement(tuple(sorted(avoid)), tuple(hit), refusal, never)


# --- who is affected --------------------------------------------------------------------------

def _pods_by_workload(pods: Iterable[Any]) -> dict[int, set[str]]:
    """{workload id: nodes its live pods are bound to} from the read model's pod views."""
    found: dict[int, set[str]] = defaultdict(set)
    for pod in pods:
        if pod.workload_id is not None and pod.node_name and pod.live:
            found[pod.workload_id].add(pod.node_name)
    return found


def _cluster_view() -> tuple[list[Obj] | None, dict[int, set[str]]]:
    try:
        cache = cluster_cache()
        cache.ready(cache.nodes, cache.pods)
        return cache.nodes.items(), _pods_by_workload(cache.pods.items())
    except KubeError:
        return None, {}


def _workload_seconds(workload: Workload) -> float | None:
    quota = Quota.objects.filter(tenant_id=workload.tenant_id).first()
    return runtime_seconds(workload.max_runtime_minutes, quota)


def affected_workloads(window: MaintenanceWindow, now: dt.datetime) -> list[Workload]:
    """The live workloads that would still run at the window's start on its nodes: those with
    a pod on one, and those not on a node yet of a GPU type it covers that were not placed
    off its nodes."""
    nodes, pods = _cluster_view()
    covered = covered_nodes(window, nodes)
    types = {entry.get("gpu_type") for entry in (window.affected or {}).values()} - {None}
    if nodes is not None:
        types |= {entry["gpu_type"] for entry in window_nodes(window, nodes).values()
                  if entry["gpu_type"]}
    on_covered = [pk for pk, on in pods.items() if on & covered]
    candidates = (Workload.objects.filter(state__in=TOLD_STATES, deleted_at__isnull=True)
                  .filter(Q(pk__in=on_covered) | Q(gpu_type__slug__in=types))
                  .select_related("owner", "tenant", "gpu_type").order_by("pk"))
    interval = Interval(window.start, window.end, 0)
    found = []
    for workload in candidates:
        on = pods.get(workload.pk, set())
        if on:
            if not on & covered:
                continue  # it runs elsewhere
            start = workload.started_at or now
        else:
            avoided = set(launch_spec_of(workload).get("avoid_nodes") or ())
            if covered <= avoided:
                continue  # placed off the window's nodes
            start = now
        if crosses(start, _workload_seconds(workload), interval):
            found.append(workload)
    return found


# --- notices ---------------------------------------------------------------------------------

def _notice_text(window: MaintenanceWindow, workload: Workload, lead: str) -> str:
    then = ("It will be stopped at the start." if window.drain
            else "Its nodes are cordoned at the start; it may be stopped by the work.")
    return (f"{lead} {window_text(window)}. {workload.name} (#{workload.pk}) in "
            f"{workload.tenant.name} would still be running then. {then} Stop it before, or "
            f"relaunch it with a maximum runtime that ends before "
            f"{when_text(window.start)}: it is then placed on other nodes.")


def _tell(window: MaintenanceWindow, notice: str, lead: str, title: str,
          now: dt.datetime) -> int:
    told = 0
    for workload in affected_workloads(window, now):
        told += notify_owner(workload, kind=Kind.MAINTENANCE,
                             key=f"maintenance:{window.pk}:{notice}:{workload.pk}",
                             title=f"{title}: {workload.name} (#{workload.pk})",
                             text=_notice_text(window, workload, lead))
    return told


def window_announce(*, window_id: int, now: dt.datetime | None = None) -> int:
    """Tell the owners of the workloads a newly announced window would reach (the task sent
    when it is created). How many were told for the first time."""
    now = now or timezone.now()
    window = MaintenanceWindow.objects.live().filter(pk=window_id, state=State.ANNOUNCED,
                                                     start__gt=now).first()
    if window is None:
        return 0
    return _tell(window, "announced", "Maintenance announced:", "Maintenance announced", now)


def _advance_notice(window: MaintenanceWindow, now: dt.datetime, *, before: dt.timedelta,
                    column: str, notice: str) -> int:
    """The notice `before` the start, once: only for a window announced earlier than that (one
    announced later was told at the announcement), sent, then recorded by a conditional
    update (a run killed in between sends again, and notify() skips those told)."""
    if getattr(window, column) is not None or not window.start - before <= now < window.start:
        return 0
    if window.created_at > window.start - before:
        return 0
    hours = int(before.total_seconds() // 3600)
    told = _tell(window, notice, f"In {hours} hour{'s' if hours != 1 else ''}:",
                 f"Maintenance in {hours} h", now)
    MaintenanceWindow.objects.filter(pk=window.pk, **{f"{column}__isnull": True}) \
        .update(**{column: now})
    return told


def _call_off(window: MaintenanceWindow, now: dt.datetime) -> bool:
    """A future window cancelled: CANCELLED, and those told of it are told it is off."""
    if not MaintenanceWindow.objects.filter(pk=window.pk, state=State.ANNOUNCED,
                                            cancelled_at__isnull=False) \
            .update(state=State.CANCELLED):
        return False
    told = (Notification.objects.filter(kind=Kind.MAINTENANCE,
                                        key__startswith=f"maintenance:{window.pk}:")
            .exclude(key=f"maintenance:{window.pk}:cancelled")
            .select_related("user"))
    users = {row.user_id: row.user for row in told}
    notify(kind=Kind.MAINTENANCE, users=users.values(), tenant=None,
           key=f"maintenance:{window.pk}:cancelled", title="Maintenance cancelled",
           text=f"Cancelled: {window_text(window)}. Your workloads may run on as planned.")
    log.info("maintenance #%s cancelled before its start; %s told", window.pk, len(users))
    return True


# --- the start and the end -------------------------------------------------------------------

def _node(kube: Kube, name: str) -> Obj | None:
    try:
        return kube.get("Node", name)
    except NotFound:
        return None


def _cordon(kube: Kube, window: MaintenanceWindow, name: str) -> bool:
    """Cordon one node for the window: True when it is cordoned by it (now or before), False
    when it is absent or someone else cordoned it (left as it is)."""
    mark = cordon_mark(window)
    for _ in range(5):
        node = _node(kube, name)
        if node is None:
            return False
        by = cordoned_by(node)
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        if by == mark and unschedulable:
            return True  # done before (a retried or restarted run): not audited again
        if unschedulable and by != mark:
            return False  # an admin's, the health check's, another window's
        try:
            node_cordon(kube=kube, node=node, by=mark, conditional=True,
                        reason=f"maintenance #{window.pk}: {window.reason}")
            return True
        except Conflict:
            continue  # changed since read: read it again
    raise KubeError(f"node {name} kept changing while it was being cordoned")


def _uncordon(kube: Kube, window: MaintenanceWindow, name: str) -> None:
    """Uncordon one node if it is still cordoned by this window."""
    for _ in range(5):
        node = _node(kube, name)
        if node is None or cordoned_by(node) != cordon_mark(window):
            return  # gone, done before, or taken over by someone else's cordon
        try:
            node_uncordon(kube=kube, node=node, conditional=True,
                          reason=f"maintenance #{window.pk} ended")
            return
        except Conflict:
            continue
    raise KubeError(f"node {name} kept changing while it was being uncordoned")


def _begin(window: MaintenanceWindow, kube: Kube, now: dt.datetime) -> None:
    """At the start: claimed (ANNOUNCED → ACTIVE), the nodes resolved again and cordoned,
    recorded. A run killed after the claim finds the window ACTIVE without cordoned_at and
    cordons again (the nodes it cordoned already are recognised by their annotation)."""
    if window.state == State.ANNOUNCED:
        if not MaintenanceWindow.objects.filter(pk=window.pk, state=State.ANNOUNCED,
                                                cancelled_at__isnull=True) \
                .update(state=State.ACTIVE):
            return
        window.state = State.ACTIVE
    if window.cordoned_at is not None:
        return
    affected = window_nodes(window, kube.list("Node")["items"])
    ours = [name for name in sorted(affected) if _cordon(kube, window, name)]
    if MaintenanceWindow.objects.filter(pk=window.pk, cordoned_at__isnull=True).update(
            cordoned=ours, cordoned_at=now, affected=affected):
        log.info("maintenance #%s started: cordoned %s", window.pk, ours)
    window.refresh_from_db()


def drain_reason(window: MaintenanceWindow) -> str:
    return (f"Stopped for {window_text(window)}: its node is being serviced. "
            f"Launch it again: it runs on other nodes, or after {when_text(window.end)}.")


def requeue_reason(window: MaintenanceWindow) -> str:
    return f"Its node is being serviced ({window_text(window)})."


def _requeue(workload: Workload, window: MaintenanceWindow, now: dt.datetime) -> Workload | None:
    """A batch run on a window's node, put back in line: kept off the window's nodes where the
    type's other nodes can hold it (it runs elsewhere), else free to take them again once
    they are back (it runs later; the cordon keeps it off them until then)."""
    placement = launch_placement(gpu_type=workload.gpu_type, gpus_per_node=workload.gpu_count,
                                 nodes=workload.nodes, seconds=_workload_seconds(workload),
                                 now=now, windows=[window])
    avoid = placement.avoid if not placement.refusal else ()
    return workload_requeue(workload=workload, reason=requeue_reason(window), avoid_nodes=avoid)


def _drain(window: MaintenanceWindow, kube: Kube, now: dt.datetime) -> int:
    """Every portal workload with a live pod on the window's nodes: a batch job put back in
    line (workloads.services.workload_requeue: stopped, and a copy submitted once), anything
    else stopped through the stop path (which does nothing to one stopping already: a
    restarted drain stops, audits and tells each once), then recorded."""
    covered = set(window.affected or {})
    pods = kube.list("Pod", label_selector=LABEL_WORKLOAD_ID)["items"]
    ids = set()
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("nodeName") in covered and status.get("phase") not in ("Succeeded", "Failed"):
            value = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_WORKLOAD_ID, "")
            if value.isdigit():
                ids.add(int(value))
    stopped = 0
    for workload in Workload.objects.filter(pk__in=ids).select_related("gpu_type") \
            .order_by("pk"):
        before = workload.state
        if workload.kind == Template.Kind.BATCH:
            _requeue(workload, window, now)
            workload.refresh_from_db(fields=["state"])
        else:
            workload = workload_stop(workload=workload, user=None, reason=drain_reason(window))
        stopped += before != workload.state
    MaintenanceWindow.objects.filter(pk=window.pk, drained_at__isnull=True).update(drained_at=now)
    window.drained_at = window.drained_at or now
    if stopped:
        log.info("maintenance #%s drained: %s workloads stopped", window.pk, stopped)
    return stopped


def _end(window: MaintenanceWindow, kube: Kube, now: dt.datetime) -> None:
    """At the end: the nodes it cordoned that are still its own uncordoned (not those whose
    re-layout failed or is still pending: they stay cordoned, the admins told), then ENDED."""
    keep = relayout_finish(window, kube, now)
    names = (set(window.cordoned or []) | set(window.affected or {})) - keep
    for name in sorted(names):
        _uncordon(kube, window, name)
    if MaintenanceWindow.objects.filter(pk=window.pk, state=State.ACTIVE).update(
            state=State.ENDED, ended_at=now):
        log.info("maintenance #%s ended: uncordoned %s", window.pk, window.cordoned)


def window_advance(*, window_id: int, now: dt.datetime | None = None,
                   kube: Kube | None = None) -> str:
    """Take one window as far as the clock says: the notices, the start (cordon, drain), the
    end. Returns its state afterwards."""
    now = now or timezone.now()
    window = MaintenanceWindow.objects.select_related("gpu_type", "created_by") \
        .filter(pk=window_id).first()
    if window is None or window.state in (State.ENDED, State.CANCELLED):
        return window.state if window is not None else ""
    if window.state == State.ANNOUNCED and window.cancelled_at is not None:
        _call_off(window, now)
        return State.CANCELLED
    if window.state == State.ANNOUNCED and now < window.start:
        _advance_notice(window, now, before=NOTICE_24H, column="notified_24h_at",
                        notice="24h")
        _advance_notice(window, now, before=NOTICE_1H, column="notified_1h_at", notice="1h")
        return window.state
    kube = kube or Kube()
    if now < window.end:
        _begin(window, kube, now)
        if window.drain and window.drained_at is None and window.cordoned_at is not None:
            _drain(window, kube, now)
        if window.relayout and window.drained_at is not None:
            relayout_advance(window, kube, now)
        return window.state
    if window.state == State.ANNOUNCED:  # over before any run saw it begin: nothing to undo
        MaintenanceWindow.objects.filter(pk=window.pk, state=State.ANNOUNCED).update(
            state=State.ENDED, ended_at=now)
        return State.ENDED
    _end(window, kube, now)
    return State.ENDED


def queues_withhold(now: dt.datetime, *, queued: bool | None = None) -> dict[str, dict[str, int]]:
    """Where the cluster queues on Kueue: while windows take GPUs of a type out of service and
    the tenants' queues together could admit more of it than the nodes left hold, each
    tenant's quota of the type is lowered by its share of the difference (in proportion to its
    quota with what reservations add), so that Kueue admits nothing onto the nodes in
    maintenance; at the end it is put back. The withholding is a QuotaAdjustment of source
    "maintenance" per type (negative, in force until the windows' last end), which the portal's
    admission counts as Kueue does. Kueue lowers no admitted workload's quota: what runs runs
    on (the drain is what stops it). Returns {tenant namespace: withheld} as set."""
    if queued is None:
        try:
            queued = queueing_on()
        except KubeError:
            return {}  # not known now: the next run decides
    tenants = [t for t in tenants_with_quota_figures(Tenant.objects.filter(quota__isnull=False))
               if t.is_active]
    figures = {t.pk: quota_figures(t, now=now) for t in tenants}
    desired: dict[int, list[AdjustmentLine]] = defaultdict(list)
    why: dict[str, str] = {}
    active = [w for w in live_windows(now) if w.start <= now < w.end] if queued else []
    if active:
        nodes = list(cluster_nodes())
        for gpu_type in GpuType.objects.filter(enabled=True):
            slug = gpu_type.slug
            down_now = down_intervals(gpu_type, now, now + dt.timedelta(seconds=1), active)
            down = sum(i.gpus for i in down_now)
            if not down:
                continue
            in_service = max(type_capacity(gpu_type, nodes) - down, 0)
            nominal = {pk: f.before_withheld(slug) for pk, f in figures.items()}
            windows = sorted(w.pk for w in active if any(
                entry.get("gpu_type") == slug for entry in (w.affected or {}).values()))
            why[slug] = (f"{down} {slug} GPUs in maintenance, {in_service} in service, the "
                         f"queues' nominal quotas {sum(nominal.values())}")
            for tenant_id, gpus in shares(sum(nominal.values()) - in_service, nominal).items():
                desired[tenant_id].append(AdjustmentLine(
                    source=QuotaAdjustment.Source.MAINTENANCE, gpu_type=slug, gpus=-gpus,
                    ref="windows:" + ",".join(map(str, windows)), reason=why[slug],
                    starts_at=min(i.start for i in down_now),
                    ends_at=max(i.end for i in down_now)))
    result = {}
    adjusted = set(tenants_adjusted_by(QuotaAdjustment.Source.MAINTENANCE)
                   .values_list("pk", flat=True))
    for tenant in tenants:
        if tenant.pk not in desired and tenant.pk not in adjusted:
            continue
        lines = desired.get(tenant.pk, [])
        reason = "; ".join(why[line.gpu_type or ""] for line in lines) or "maintenance over"
        if quota_adjustments_set(tenant=tenant, source=QuotaAdjustment.Source.MAINTENANCE,
                                 adjustments=lines, reason=reason):
            result[tenant.namespace] = {line.gpu_type or "": -line.gpus for line in lines}
    return result


def windows_advance(*, now: dt.datetime | None = None) -> dict[int, str]:
    """The beat's cycle: every window not yet over or called off, as far as the clock says.
    One that fails (the cluster away) is tried again at the next run."""
    now = now or timezone.now()
    results = {}
    for pk in MaintenanceWindow.objects.filter(state__in=(State.ANNOUNCED, State.ACTIVE)) \
            .values_list("pk", flat=True):
        try:
            results[pk] = window_advance(window_id=pk, now=now)
        except KubeError as exc:
            log.warning("maintenance #%s: the cluster did not answer (%s); tried again later",
                        pk, exc)
    try:
        queues_withhold(now)
    except KubeError as exc:
        log.warning("maintenance: the queues' quotas were not adjusted (%s); tried again later",
                    exc)
    return results
