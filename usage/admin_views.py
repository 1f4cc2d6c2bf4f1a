"""The admin's usage pages, under /admin/ (admin_urls.py): the usage report of every tenant
(`/admin/usage/`: views.report_page with the tenant filter) and the GPU dashboard
(`/admin/gpus/`): per GPU type capacity vs allocated vs used, nodes and their health, the
tenants' allocations, allocated-but-idle workloads, unhealthy GPUs, and GPUs busy outside the
portal's workloads. Nodes and the capacity view come from the cluster's
read model (cluster); when the cluster does not answer, the page says so and shows what
the portal's own records know.

"Used" is the use of the allocated GPUs only: the GPUs of workloads running now, at most as many
per workload as it was given (the ones it was sampled on last, should its pod have moved), so
it never exceeds "allocated". Samples of workloads that ended within the window, and GPUs no
running workload holds, are not in it; GPUs that report utilisation while no running workload
of the portal holds them (a pod the portal does not know, something outside Kubernetes) are
shown apart, as "busy outside the portal"."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict
from typing import Any

from django.db.models import Avg, Count, Max, Q, Sum
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from catalogue.models import GpuType
from cluster.capacity import (
    GpuTypeCapacity,
    capacity_by_type,
    cluster_nodes,
    gpu_capacity,
    node_matches,
    with_admitted,
)
from identity.access import SignedInRequest, admin_required
from kube.client import KubeError
from kube.quantity import parse_quantity
from workloads.models import Workload
from workloads.querysets import GPU_TOTAL

from .culling import idle_workloads
from .health import UNHEALTHY, node_cordoned_by_portal, unhealthy_devices, unhealthy_gpus_by_node
from .models import GpuDevice, GpuSample
from .views import report_page

log = logging.getLogger(__name__)

RECENT = dt.timedelta(minutes=5)  # "actually used": the mean utilisation over this
CLUSTER_UNREACHABLE = ("The cluster is unreachable right now: capacity and nodes are not "
                       "shown. Allocations and utilisation come from the portal's records.")


@dataclasses.dataclass
class TypeRow:
    gpu_type: GpuType
    nodes: int | None = None
    capacity: int | None = None  # GPUs the nodes have
    usable: int | None = None  # allocatable, less unhealthy GPUs
    unhealthy: int = 0
    allocated: int = 0  # held by the portal's running workloads (what "used" is measured on)
    waiting: int = 0  # asked for by the portal's workloads not running yet
    free: int | None = None  # the capacity view's free GPUs
    used: float = 0.0  # GPU-equivalents: Σ mean utilisation / 100 of the allocated GPUs
    util_avg: float | None = None
    outside: int | None = None  # GPUs busy outside the portal's workloads (None: unknown)

    @property
    def used_percent(self) -> float | None:
        return round(100 * self.used / self.allocated, 1) if self.allocated else None


@dataclasses.dataclass
class NodeRow:
    name: str
    gpu_types: list[str]
    capacity: int
    allocatable: int
    unhealthy: list[GpuDevice]
    cordoned: bool
    cordoned_by_portal: bool

    @property
    def status(self) -> str:
        if self.unhealthy:
            return "degraded"
        return "cordoned" if self.cordoned else "ok"


def _allocated_devices(now: dt.datetime) -> list[dict[str, Any]]:
    """Per GPU of a running workload sampled in the last RECENT: its mean utilisation. At most
    `gpu_total` GPUs per workload (every rank's), the ones sampled last (a pod that moved leaves samples on
    GPUs it no longer holds)."""
    per_device = (GpuSample.objects.filter(at__gte=now - RECENT,
                                           workload__state=Workload.State.RUNNING)
                  .values("workload_id", "workload__gpu_count", "workload__nodes",
                          "workload__gpu_type__slug", "tenant_id", "uuid", "mig_instance")
                  .annotate(mean=Avg("util"), last=Max("at")).order_by())
    by_workload: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in per_device:
        by_workload[row["workload_id"]].append(row)
    held = []
    for rows in by_workload.values():
        rows.sort(key=lambda r: (r["last"], r["uuid"], r["mig_instance"]), reverse=True)
        held += rows[:rows[0]["workload__gpu_count"] * rows[0]["workload__nodes"]]
    return held


def _recent_use(now: dt.datetime) -> tuple[dict[str, float], dict[str, float], dict[int, float]]:
    """From the last RECENT of samples of the allocated GPUs: per GPU type slug, GPU-equivalents
    used and mean utilisation; per tenant id, the mean utilisation."""
    used: dict[str, float] = defaultdict(float)
    type_utils: dict[str, list[float]] = defaultdict(list)
    tenant_utils: dict[int, list[float]] = defaultdict(list)
    for row in _allocated_devices(now):
        if row["mean"] is None:
            continue  # a MIG instance with memory only: its use is not known, not nought
        slug = row["workload__gpu_type__slug"]
        used[slug] += row["mean"] / 100.0
        type_utils[slug].append(row["mean"])
        tenant_utils[row["tenant_id"]].append(row["mean"])
    mean = {slug: round(sum(v) / len(v), 1) for slug, v in type_utils.items()}
    tenant_mean = {t: round(sum(v) / len(v), 1) for t, v in tenant_utils.items()}
    return dict(used), mean, tenant_mean


def busy_outside(now: dt.datetime) -> list[GpuDevice]:
    """GPUs whose last report (within RECENT) shows utilisation while no running workload of
    the portal holds them."""
    return list(GpuDevice.objects.filter(last_seen__gte=now - RECENT, last_util__gt=0)
                .exclude(last_workload__state=Workload.State.RUNNING)
                .order_by("node", "index", "mig_instance"))


@dataclasses.dataclass
class HolderRow:
    """A pod on a GPU as the last scrape found it, with its workload when it is the portal's."""

    namespace: str
    pod: str
    workload: Workload | None
    util: float | None  # its own where scope is "process"; the whole GPU's where "device"
    memory_used_mib: int | None
    scope: str


@dataclasses.dataclass
class DeviceRow:
    device: GpuDevice
    holders: list[HolderRow]


def with_holders(devices: list[GpuDevice]) -> list[DeviceRow]:
    """Each device with every pod the last scrape found on it (several on a time-sliced GPU,
    the one holding it on a MIG instance); their workloads in one query. A row last scraped
    before the scraper kept every pod names the one it kept."""
    on = {d.pk: d.last_holders or ([{"namespace": d.last_namespace, "pod": d.last_pod,
                                     "workload": d.last_workload_id, "util": d.last_util,
                                     "memory_used_mib": d.last_memory_used_mib}]
                                   if d.last_pod else []) for d in devices}
    ids = {h["workload"] for holders in on.values() for h in holders if h.get("workload")}
    workloads = Workload.objects.in_bulk(ids) if ids else {}
    return [DeviceRow(device=d, holders=[
        HolderRow(namespace=h.get("namespace", ""), pod=h.get("pod", ""),
                  workload=workloads.get(h.get("workload")), util=h.get("util"),
                  memory_used_mib=h.get("memory_used_mib"), scope=h.get("scope", ""))
        for h in on[d.pk]]) for d in devices]


def shared_devices(now: dt.datetime) -> list[DeviceRow]:
    """GPUs reported within RECENT that several pods share (time-slicing) and MIG instances
    held by a pod, each with every pod on it."""
    recent = (GpuDevice.objects.filter(last_seen__gte=now - RECENT)
              .exclude(last_holders=[]).order_by("node", "index", "mig_instance"))
    return with_holders([d for d in recent if d.mig_instance or len(d.last_holders) > 1])


def _node_types(gpu_types: list[GpuType], nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """node name → the slugs of the GPU types whose selector it matches."""
    return {n["metadata"]["name"]: [t.slug for t in gpu_types if t.node_selector and node_matches(
        n["metadata"].get("labels") or {}, t.node_selector)] for n in nodes}


def gpu_type_rows(nodes: list[dict[str, Any]] | None, now: dt.datetime,
                  outside: list[GpuDevice] | None = None, *,
                  capacity: dict[str, GpuTypeCapacity] | None = None) -> list[TypeRow]:
    """`capacity`: the capacity view of these nodes (default: theirs with no pod known)."""
    gpu_types = list(GpuType.objects.all())
    if capacity is None and nodes is not None:
        capacity = with_admitted(*capacity_by_type(gpu_types, nodes, (),
                                                   unhealthy_gpus_by_node()))
    active = Workload.objects.filter(state__in=Workload.ACTIVE_STATES).order_by()
    totals = active.values("gpu_type__slug").annotate(
        running=Sum(GPU_TOTAL, filter=Q(state=Workload.State.RUNNING)),
        waiting=Sum(GPU_TOTAL, filter=~Q(state=Workload.State.RUNNING)))
    held = {r["gpu_type__slug"]: r["running"] for r in totals}
    asked = {r["gpu_type__slug"]: r["waiting"] for r in totals}
    used, mean, _ = _recent_use(now)
    outside_by_type: dict[str, int] = defaultdict(int)
    if nodes is not None:
        node_types = _node_types(gpu_types, nodes)
        for device in outside if outside is not None else busy_outside(now):
            for slug in node_types.get(device.node, []):
                outside_by_type[slug] += 1
    rows = []
    for gpu_type in gpu_types:
        row = TypeRow(gpu_type=gpu_type, allocated=held.get(gpu_type.slug) or 0,
                      waiting=asked.get(gpu_type.slug) or 0,
                      used=round(used.get(gpu_type.slug, 0.0), 2),
                      util_avg=mean.get(gpu_type.slug),
                      outside=outside_by_type.get(gpu_type.slug, 0) if nodes is not None else None)
        cap = capacity.get(gpu_type.slug) if capacity is not None else None
        if cap is not None:
            row.nodes, row.usable, row.free = cap.nodes, cap.allocatable, cap.free
            row.capacity, row.unhealthy = cap.installed, cap.unhealthy
        elif capacity is not None:
            row.nodes, row.usable, row.free, row.capacity = 0, 0, 0, 0
        rows.append(row)
    return rows


def node_rows(nodes: list[dict[str, Any]]) -> list[NodeRow]:
    """GPU nodes (those with a GPU resource or GPUs the exporters reported), degraded first."""
    gpu_types = list(GpuType.objects.all())
    bad: dict[str, list[GpuDevice]] = defaultdict(list)
    for device in unhealthy_devices():
        bad[device.node].append(device)
    reported = set(GpuDevice.objects.values_list("node", flat=True).distinct())
    rows = []
    for node in nodes:
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        resources = {k for k in (status.get("capacity") or {}) if "gpu" in k or "/mig-" in k}
        if not resources and name not in reported:
            continue
        labels = node["metadata"].get("labels") or {}
        rows.append(NodeRow(
            name=name,
            gpu_types=[t.slug for t in gpu_types
                       if t.node_selector and node_matches(labels, t.node_selector)],
            capacity=sum(int(parse_quantity((status.get("capacity") or {}).get(r, "0")))
                         for r in resources),
            allocatable=sum(int(parse_quantity((status.get("allocatable") or {}).get(r, "0")))
                            for r in resources),
            unhealthy=bad.get(name, []),
            cordoned=bool((node.get("spec") or {}).get("unschedulable")),
            cordoned_by_portal=node_cordoned_by_portal(node)))
    rows.sort(key=lambda r: (not r.unhealthy, not r.cordoned, r.name))
    return rows


def tenant_allocations(now: dt.datetime) -> list[dict[str, Any]]:
    """Per tenant and GPU type: GPUs held by running workloads, GPUs waiting, workloads."""
    _, _, tenant_mean = _recent_use(now)
    rows = (Workload.objects.filter(state__in=Workload.ACTIVE_STATES).order_by()
            .values("tenant_id", "tenant__name", "gpu_type__slug")
            .annotate(running=Sum(GPU_TOTAL, filter=Q(state=Workload.State.RUNNING)),
                      waiting=Sum(GPU_TOTAL, filter=~Q(state=Workload.State.RUNNING)),
                      workloads=Count("id"))
            .order_by("tenant__name", "gpu_type__slug"))
    return [{"tenant": r["tenant__name"], "gpu_type": r["gpu_type__slug"],
             "running": r["running"] or 0, "waiting": r["waiting"] or 0,
             "workloads": r["workloads"], "util_avg": tenant_mean.get(r["tenant_id"])}
            for r in rows]


@admin_required
@require_GET
def gpu_dashboard(request: SignedInRequest) -> HttpResponse:
    now = timezone.now()
    capacity: dict[str, GpuTypeCapacity] | None = None
    try:
        nodes: list[dict[str, Any]] | None = cluster_nodes()
        capacity = gpu_capacity()
        cluster_error = None
    except KubeError as exc:
        log.warning("cluster unreachable for the GPU dashboard: %s", exc)
        nodes, cluster_error = None, CLUSTER_UNREACHABLE
    outside = busy_outside(now)
    return render(request, "usage/gpu_dashboard.html", {
        "types": gpu_type_rows(nodes, now, outside, capacity=capacity),
        "outside": with_holders(outside),
        "shared": shared_devices(now),
        "nodes": node_rows(nodes) if nodes is not None else None,
        "tenants": tenant_allocations(now),
        "idle": idle_workloads(now=now),
        "unhealthy": with_holders(list(unhealthy_devices().filter(health__in=UNHEALTHY))),
        "cluster_error": cluster_error, "recent_minutes": int(RECENT.total_seconds() // 60),
    })


@admin_required
def admin_usage_page(request: SignedInRequest) -> HttpResponse:
    return report_page(request, admin=True)
