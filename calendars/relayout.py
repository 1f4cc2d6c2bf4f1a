"""A maintenance window's re-layout of its nodes: a MIG config or time-slicing replicas per node
(catalogue/layouts.py says what each means and what a GPU can take).

- The plan (`relayout_plan`, when the window is announced): each node's change in words, the
  capacity of every GPU type it moves (units before → after, the whole cluster's), the units no
  GPU type offers, and the tenants whose quota of a type would then exceed what exists. Quotas
  are never changed here: the admins are warned and decide.
- The beat, once the window has cordoned and drained its nodes (`relayout_advance`): a node
  whose GPUs no pod holds any longer (the MIG manager can act only then) is relabelled for the
  agent that lays it out — `nvidia.com/mig.config` for the GPU operator's MIG manager,
  `nvidia.com/device-plugin.config` for the device plugin — audited; at the next runs the node
  is read until the agent reports the layout applied (`nvidia.com/mig.config.state=success`
  and the new units allocatable; for time-slicing, the units) or failed (`failed`).
- At the window's end (`relayout_finish`): a node whose layout was asked for and not applied
  (failed, or still pending) stays cordoned, and the window's author is told why; a node never
  relabelled (pods held its GPUs to the end) keeps its old layout and is uncordoned as usual.

Each node's progress is one entry of `relayout_state`, written by a conditional update of the
whole column against what was read (a concurrent run's write is read again, never overwritten).
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from audit.services import audit_record
from catalogue.layouts import (
    LABEL_GPU_COUNT,
    LABEL_MIG_CONFIG_STATE,
    Target,
    applied,
    change_text,
    is_gpu_resource,
    node_units,
    target_units,
    units_text,
)
from catalogue.models import GpuType
from catalogue.sharing import node_layout
from cluster.capacity import cluster_nodes, dra_node_layouts
from identity.selectors import site_admins
from kube.client import Kube, KubeError, NotFound
from notifications.models import Kind
from notifications.services import notify
from tenants.models import GpuQuota

from .models import MaintenanceWindow
from .selectors import type_capacity

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WAITING, RELABELLED, APPLIED, FAILED = "waiting", "relabelled", "applied", "failed"
UNCHANGED = "its GPUs were still held at the window's end; its layout is unchanged"
GPU_RESOURCE_PREFIX = "nvidia.com/"


def predicted_node(node: Obj, target: Target) -> Obj:
    """The node as it would be once laid out: its label set, its GPU units replaced."""
    after = copy.deepcopy(node)
    key, value = target.label
    after["metadata"].setdefault("labels", {})[key] = value
    status = after.setdefault("status", {})
    for field in ("capacity", "allocatable"):
        resources = {k: v for k, v in (status.get(field) or {}).items() if not is_gpu_resource(k)}
        resources.update({k: str(v) for k, v in target_units(node, target).items()})
        status[field] = resources
    return after


def relayout_plan(relayout: dict[str, dict[str, Any]], nodes: Iterable[Obj] | None = None,
                  gpu_types: Iterable[GpuType] | None = None) -> dict[str, Any]:
    """What a re-layout would do: {"nodes": {name: change in words}, "gpu_types": [{gpu_type,
    before, after}] (units, the whole cluster, only the types it moves), "warnings": [...]}."""
    if not relayout:
        return {}
    nodes = list(cluster_nodes() if nodes is None else nodes)
    types = list(GpuType.objects.filter(enabled=True) if gpu_types is None else gpu_types)
    by_name = {node["metadata"]["name"]: node for node in nodes}
    changes: dict[str, str] = {}
    after_nodes = []
    for node in nodes:
        name = node["metadata"]["name"]
        if name in relayout and name in by_name:
            target = Target.of(relayout[name])
            changes[name] = change_text(node, target)
            node = predicted_node(node, target)
        after_nodes.append(node)
    moved: list[dict[str, Any]] = []
    offered = set()
    for gpu_type in sorted(types, key=lambda t: t.slug):
        before, after = type_capacity(gpu_type, nodes), type_capacity(gpu_type, after_nodes)
        offered.add(gpu_type.resource_name)
        if before != after:
            moved.append({"gpu_type": gpu_type.slug, "before": before, "after": after})
    warnings = []
    for name in sorted(changes):
        target = Target.of(relayout[name])
        orphans = {r: n for r, n in target_units(by_name[name], target).items()
                   if r not in offered}
        for resource, units in sorted(orphans.items()):
            warnings.append(f"{name}'s {units} units of {resource} are no GPU type's: add one "
                            "(GPU types page) for them to be launched.")
    for row in moved:
        if row["after"] >= row["before"]:
            continue
        for limit in GpuQuota.objects.filter(gpu_type__slug=row["gpu_type"],
                                             gpus__gt=row["after"]) \
                .select_related("quota__tenant").order_by("quota__tenant__name"):
            warnings.append(
                f"{limit.quota.tenant.name}'s quota of {row['gpu_type']} ({limit.gpus}) would "
                f"exceed the {row['after']} there would be; its quota is left as it is.")
    return {"nodes": changes, "gpu_types": moved, "warnings": warnings}


def plan_lines(window: MaintenanceWindow) -> list[str]:
    """The plan in lines, for the pages, the CLI and the announcement's audit."""
    plan = window.relayout_plan or {}
    lines = [text for _, text in sorted((plan.get("nodes") or {}).items())]
    lines += [f"{row['gpu_type']}: {row['before']} → {row['after']} units"
              for row in plan.get("gpu_types") or []]
    return lines + list(plan.get("warnings") or [])


def gpu_node_rows() -> list[dict[str, Any]]:
    """The admin's view of how each GPU node is carved: name, layout in words, the units it
    advertises, whether it is cordoned. Empty when the cluster's copy is not there."""
    try:
        nodes = list(cluster_nodes())
    except KubeError:
        return []
    try:
        # a node whose GPUs NVIDIA's DRA driver publishes: carved by the claims it is given
        dra = dra_node_layouts()
    except KubeError:
        dra = {}
    rows = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels") or {}
        name = node["metadata"]["name"]
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if name in dra:
            layout, units = dra[name]
            rows.append({"name": name, "layout": layout, "units": units, "mig_state": "",
                         "cordoned": cordoned})
            continue
        if not labels.get(LABEL_GPU_COUNT):
            continue
        rows.append({"name": name, "layout": node_layout(name, labels).split(": ", 1)[-1],
                     "units": units_text(node_units(node)),
                     "mig_state": labels.get(LABEL_MIG_CONFIG_STATE, ""),
                     "cordoned": cordoned})
    return rows


# --- the beat --------------------------------------------------------------------------------

def _record(window: MaintenanceWindow, name: str, state: str, reason: str,
            now: dt.datetime) -> bool:
    """Set one node's entry, conditionally on the column as read; False when another run
    changed it first (the caller's next run reads it again)."""
    before = dict(window.relayout_state or {})
    after = {**before, name: {"state": state, "reason": reason, "at": now.isoformat()}}
    done = MaintenanceWindow.objects.filter(pk=window.pk, relayout_state=before) \
        .update(relayout_state=after)
    if done:
        window.relayout_state = after
    return bool(done)


def _state(window: MaintenanceWindow, name: str) -> str:
    return str(((window.relayout_state or {}).get(name) or {}).get("state") or WAITING)


def gpu_holders(kube: Kube, name: str) -> list[str]:
    """The pods still on node `name` that ask for a GPU resource and have not ended."""
    held = []
    for pod in kube.list("Pod", field_selector=f"spec.nodeName={name}")["items"]:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        containers = ((pod.get("spec") or {}).get("containers") or []) \
            + ((pod.get("spec") or {}).get("initContainers") or [])
        if any(key.startswith(GPU_RESOURCE_PREFIX)
               for c in containers for key in ((c.get("resources") or {}).get("limits") or {})):
            meta = pod.get("metadata") or {}
            held.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(held)


def _relabel(kube: Kube, window: MaintenanceWindow, node: Obj, target: Target,
             now: dt.datetime) -> None:
    name = node["metadata"]["name"]
    key, value = target.label
    labels = node["metadata"].get("labels") or {}
    kube.patch("Node", name, {"metadata": {"labels": {key: value}}})
    audit_record(actor=None, action="node.relabel", target=name,
                 before={key: labels.get(key), "units": node_units(node)},
                 after={key: value, "units": target_units(node, target),
                        "reason": f"maintenance #{window.pk}: {target.text}"})
    _record(window, name, RELABELLED, f"{key}={value}", now)
    log.info("maintenance #%s: %s relabelled %s=%s", window.pk, name, key, value)


def _tell_failure(window: MaintenanceWindow, name: str, reason: str, *,
                  cordoned: bool = True) -> None:
    audit_record(actor=None, action="maintenance.relayout_failed", target=name,
                 before=None, after={"window": window.pk, "reason": reason})
    log.warning("maintenance #%s: %s was not laid out: %s", window.pk, name, reason)
    told = list(site_admins())  # any of them may have to look at the node, not only the author
    if window.created_by is not None and all(user.pk != window.created_by.pk for user in told):
        told.append(window.created_by)
    if told:
        notify(kind=Kind.MAINTENANCE, users=told, tenant=None,
               key=f"maintenance:{window.pk}:relayout:{name}",
               title=f"Re-layout of {name} failed",
               text=f"Maintenance #{window.pk} ({window.reason}): {name} was not laid out as "
                    f"asked: {reason}. "
                    + ("It stays cordoned until an administrator looks at it." if cordoned
                       else "It keeps its old layout and is back in service."))


def relayout_advance(window: MaintenanceWindow, kube: Kube, now: dt.datetime) -> None:
    """One run during the window, after the drain: each node not yet done relabelled once its
    GPUs are free, or read for the agent's answer."""
    for name, wanted in sorted((window.relayout or {}).items()):
        state = _state(window, name)
        if state in (APPLIED, FAILED):
            continue
        try:
            node = kube.get("Node", name)
        except NotFound:
            node = None
        if node is None:
            if _record(window, name, FAILED, "the node is gone", now):
                _tell_failure(window, name, "the node is gone")
            continue
        target = Target.of(wanted)
        if state == WAITING:
            holders = gpu_holders(kube, name)
            if holders:
                reason = f"waiting for {len(holders)} pods to leave its GPUs: " \
                         + ", ".join(holders[:5])
                if (window.relayout_state or {}).get(name, {}).get("reason") != reason:
                    _record(window, name, WAITING, reason, now)
                continue
            _relabel(kube, window, node, target, now)
            node = kube.get("Node", name) or node
        done, why = applied(node, target)
        if done:
            _record(window, name, APPLIED, change_text_after(window, name), now)
            audit_record(actor=None, action="maintenance.relayout", target=name, before=None,
                         after={"window": window.pk, **target.as_json(),
                                "units": node_units(node)})
        elif why and _record(window, name, FAILED, why, now):
            _tell_failure(window, name, why)


def change_text_after(window: MaintenanceWindow, name: str) -> str:
    return str(((window.relayout_plan or {}).get("nodes") or {}).get(name) or "applied")


def relayout_finish(window: MaintenanceWindow, kube: Kube, now: dt.datetime) -> set[str]:
    """At the end: one last reading of the nodes relabelled; those not laid out are failed
    (told). Returns the names to leave cordoned: those relabelled and not laid out (a node
    never relabelled keeps the layout it had and is used as before)."""
    if not window.relayout:
        return set()
    if window.drained_at is not None:
        relayout_advance(window, kube, now)
    keep = set()
    for name in sorted(window.relayout):
        entry = (window.relayout_state or {}).get(name) or {}
        state = _state(window, name)
        if state == APPLIED:
            continue
        if state == FAILED:
            if entry.get("reason") != UNCHANGED:
                keep.add(name)
            continue
        reason = UNCHANGED
        if state == RELABELLED:
            reason = "not applied by the window's end (the agent reported no success)"
            keep.add(name)
        if _record(window, name, FAILED, reason, now):
            _tell_failure(window, name, reason, cordoned=name in keep)
    return keep
