"""One launch advice: what a launch is told before it is submitted, the same on the launch page's
live check and in `POST workloads/check/`.

Every rule that can refuse or warn before a launch is an advisor of hooks.LAUNCH_ADVISORS, in
that hook's order: "fit" here (a request no node or group of nodes can ever hold, one beyond
the quota, one that will wait for free GPUs; a distributed template whose engine the cluster
lacks), and the apps above's (budgets, calendars). The rules that refuse at submit read the
same functions: `never_fits` and kube.engines.engine_refusal are validation's refusals too.

A check reads what its advisors share once (`launch_context`): the tenant's quota figures and
the GPUs its workloads hold, the cluster's capacity, the time; `shared` carries what the
advisors of other apps read once between them (the calendar's version: the calendar itself is
held in the process, calendars/cache.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.template.defaultfilters import pluralize
from django.utils import timezone

from catalogue.models import GpuType, Template
from catalogue.selectors import capacity_outlook
from catalogue.sharing import DRA, equivalents_text
from cluster.capacity import GpuTypeCapacity
from core.registry import SharedReads
from credentials.pulls import REFUSED, RESOLVED, PullCheck, image_pull_check
from kube.client import KubeError
from kube.dra import dra_refusal
from kube.engines import engine_refusal
from kube.kueue import queueing_on
from tenants.models import Tenant

from .hooks import LAUNCH_ADVISORS, LaunchContext, Note
from .selectors import TenantGpuReads, department_refusal, tenant_gpu_reads


def launch_context(*, tenant: Tenant, user: Any, gpu_type: GpuType, gpus_per_node: int,
                   nodes: int = 1, max_runtime_minutes: int | None = None,
                   template: Template | None = None,
                   reads: TenantGpuReads | None = None,
                   now: dt.datetime | None = None) -> LaunchContext:
    """The check's context; `reads`: the tenant's GPU reads when the caller has them (the
    launch page's, which shows them too)."""
    reads = reads or tenant_gpu_reads(tenant)
    return LaunchContext(
        tenant=tenant, user=user, gpu_type=gpu_type, template=template,
        gpus_per_node=gpus_per_node, nodes=nodes,
        max_runtime_minutes=max_runtime_minutes or reads.figures.max_runtime_minutes or None,
        now=now or timezone.now(), reads=reads, shared=SharedReads())


def launch_advice(launch: LaunchContext) -> list[Note]:
    """Every advisor's notes on the launch, in the advisors' order."""
    return [note for advisor in LAUNCH_ADVISORS for note in advisor(launch)]


# --- the image: resolved with the launch's registry login --------------------------------------

def launch_pull_check(request: dict[str, Any], tenant: Tenant) -> PullCheck | None:
    """The clean launch's image resolved with its registry secrets' login for that registry
    (credentials/pulls.py), within PORTAL_REGISTRY_CHECK_SECONDS; None when it names no such
    secret, or the check is off. The launch refuses what this refuses (validation.py)."""
    seconds = settings.PORTAL_REGISTRY_CHECK_SECONDS
    if not seconds or not request.get("image") or not request.get("secrets"):
        return None
    return image_pull_check(image=request["image"], uses=request["secrets"],
                            namespace=tenant.namespace, timeout=seconds)


def pull_advice(check: PullCheck | None) -> list[Note]:
    """The check as a note: an error where the launch would be refused, a warning where the
    registry could not say, what it resolves to where it can be pulled."""
    if check is None:
        return []
    level = {REFUSED: "error", RESOLVED: "info"}.get(check.outcome, "warning")
    return [(level, check.message)]


# --- fit: the cluster and the quota ------------------------------------------------------------

def never_fits(capacity: GpuTypeCapacity | None, slug: str, gpus_per_node: int, nodes: int
               ) -> tuple[str, str] | None:
    """(field, why) when no node (or group of `nodes` nodes) of the type could ever hold the
    request, whatever else runs; None when one could. `capacity`: the type's (None: no node
    of the cluster offers it)."""
    if capacity is None or capacity.nodes == 0 or capacity.largest_node == 0:
        return "gpu_type", f"No node of the cluster offers {slug} GPUs; this request can never run."
    if gpus_per_node > capacity.largest_node:
        return "gpu_count", (f"No {slug} node has {gpus_per_node} GPUs (the largest has "
                             f"{capacity.largest_node}); this request can never run.")
    if nodes > 1:
        offering = capacity.nodes_offering(gpus_per_node)
        if offering < nodes:
            return "nodes", (f"Needs {nodes} nodes with {gpus_per_node} {slug} GPUs each; the "
                             f"cluster has {offering} such node{pluralize(offering)}, so this "
                             "request can never run.")
    return None


def group_summary(capacity: GpuTypeCapacity | None, slug: str, gpus_per_node: int,
                  nodes: int) -> str:
    """"2 nodes × 4 a100: 8 GPUs of the quota; 2 nodes have 4 free now"."""
    text = f"{nodes} nodes × {gpus_per_node} {slug}: {gpus_per_node * nodes} GPUs of the quota"
    if capacity is None:
        return text + "; free nodes unknown"
    free = capacity.nodes_free(gpus_per_node)
    return text + f"; {free} node{pluralize(free)} {'has' if free == 1 else 'have'} " \
                  f"{gpus_per_node} free now"


def fit_advice(launch: LaunchContext) -> list[Note]:
    """Whether the cluster could ever run it (its engine for a group, a node or nodes large
    enough: an error when not), whether the quota admits it now (a warning when not), and
    whether it waits for free GPUs (info)."""
    slug, count, nodes = launch.gpu_type.slug, launch.gpus_per_node, launch.nodes
    reads, capacity = launch.reads, launch.capacity
    notes: list[Note] = []
    template = launch.template
    unavailable = engine_refusal(template.engine) if template and template.distributed else None
    if unavailable:
        notes.append(("error", unavailable))
    refusal = dra_refusal() if launch.gpu_type.sharing == DRA else None
    if refusal:
        notes.append(("error", refusal))
    if nodes > 1:
        notes.append(("info", group_summary(capacity, slug, count, nodes)))
    never = None
    # a DRA type's figures are its devices (cluster/devices.py): a claim is given devices of
    # one node, so one larger than any node's can never be allocated, as for any other type
    if reads.capacity is not None and not refusal:  # the cluster answered
        never = never_fits(capacity, slug, count, nodes)
        if never is not None:
            notes.append(("error", never[1]))
    department_note = _department_note(launch)
    if department_note is not None:
        notes.append(department_note)
    used, limit = reads.used.gpus(slug), reads.figures.gpus(slug)
    used_total, limit_total = reads.used.gpus_total, reads.figures.in_force.gpus_total
    weight = reads.figures.equivalents(slug, launch.gpus)  # GPU-equivalents, as the total
    if used + launch.gpus > limit:
        notes.append(("warning", f"Beyond the quota: {launch.tenant.name} uses {used} of "
                                 f"{limit} {slug} GPUs; {launch.gpus} more would exceed it."))
    elif used_total + weight > limit_total:
        notes.append(("warning", f"Beyond the quota: {launch.tenant.name} uses "
                                 f"{equivalents_text(used_total)} of {limit_total} GPUs in "
                                 f"all; {equivalents_text(weight)} more would exceed it."))
    elif never is None and capacity is not None:
        if nodes > 1 and capacity.nodes_free(count) < nodes:
            notes.append(("info", f"It waits (queued whole, no rank started) until {nodes} "
                                  f"nodes have {count} {slug} GPUs free, then every rank "
                                  "starts at once."))
        elif nodes == 1 and count > capacity.free:
            notes.append(("info", f"Only {capacity.free} {slug} GPUs are free right now: it "
                                  "will wait (pending) until enough are, then start by itself."))
    return notes


def _department_note(launch: LaunchContext) -> Note | None:
    """What the admission would say of the department's cap (services._department_check):
    refused for good under Kueue ("error"), over the cap now without it ("warning")."""
    tenant = launch.tenant
    department = tenant.department if tenant.department_id is not None else None
    if department is None:
        return None
    try:
        queued = queueing_on()
    except KubeError:
        queued = False  # as the admission takes it
    refusal = department_refusal(tenant, department, slug=launch.gpu_type.slug,
                                 wanted=launch.gpus, queued=queued)
    if refusal is None:
        return None
    return ("error" if queued else "warning", f"Beyond the department's cap: {refusal}")


def capacity_outlook_advice(launch: LaunchContext) -> list[Note]:
    """The type's free GPUs now and how the outlook's entries (the calendar) change them in
    the next hours; nothing when nothing changes them."""
    capacity = launch.capacity
    if capacity is None:
        return []
    outlook = capacity_outlook(launch.gpu_type, tenant=launch.tenant, now=launch.now,
                               free_now=capacity.free, reads=launch.shared)
    if outlook is None or not outlook["changes"]:
        return []
    return [("info", f"{outlook['text']} — see the calendar.")]
