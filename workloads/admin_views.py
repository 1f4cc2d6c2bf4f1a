"""The admins' queue page (/admin/queues/): per GPU type and tenant, what Kueue holds.

For each tenant's ClusterQueue and each GPU flavor: its nominal quota, what it uses, how much of
that is borrowed, what it has idle to lend, and what waits (workloads and GPUs, from the portal's
records); per GPU type the cohort's sums. Then every queued workload, one entry each: a
distributed group (N nodes × G GPUs) is one entry with its GPU total, as Kueue admits it whole.
Below, the trail of reclaims (preemptions).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.models import AuditRecord
from catalogue.models import GpuType
from identity.access import admin_required
from kube.client import Kube, KubeError
from kube.kueue import queueing_shown
from kube.labels import MANAGED_BY
from kube.quantity import parse_quantity
from tenants.kueue import flavor_name
from tenants.models import Tenant

from .models import Workload
from .querysets import GPU_TOTAL
from .queue import annotate_queue

WAITING_SHOWN = 100


@dataclasses.dataclass
class QueueRow:
    tenant: str
    nominal: int = 0
    used: int = 0
    borrowed: int = 0
    lendable: int = 0
    queued_workloads: int = 0
    queued_gpus: int = 0
    weighted_share: str = ""


def _count(value: Any) -> int:
    return int(parse_quantity(str(value))) if value not in (None, "") else 0


def queue_rows(cluster_queues: list[dict[str, Any]], gpu_slugs: list[str],
               tenant_names: dict[str, str], waiting: dict[tuple[str, str], tuple[int, int]]
               ) -> dict[str, list[QueueRow]]:
    """Pure: GPU type slug → a row per tenant queue. `waiting`: (namespace, slug) →
    (queued workloads, their GPUs)."""
    rows: dict[str, list[QueueRow]] = defaultdict(list)
    for queue in cluster_queues:
        name = queue["metadata"]["name"]
        spec, status = queue.get("spec") or {}, queue.get("status") or {}
        share = str(((status.get("fairSharing") or {}).get("weightedShare")) or "")
        usage = {f.get("name"): {r.get("name"): r for r in f.get("resources") or []}
                 for f in status.get("flavorsUsage") or []}
        quotas = {}
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                quotas[flavor.get("name")] = flavor.get("resources") or []
        for slug in gpu_slugs:
            flavor = flavor_name(slug)
            resources = [r for r in quotas.get(flavor, []) if _count(r.get("nominalQuota")) or
                         r.get("name") in (usage.get(flavor) or {})]
            nominal = sum(_count(r.get("nominalQuota")) for r in quotas.get(flavor, []))
            used = sum(_count(u.get("total")) for u in (usage.get(flavor) or {}).values())
            borrowed = sum(_count(u.get("borrowed")) for u in (usage.get(flavor) or {}).values())
            lending = [r.get("lendingLimit") for r in resources if r.get("lendingLimit")
                       is not None]
            idle = max(nominal - (used - borrowed), 0)
            lendable = min(idle, sum(_count(v) for v in lending)) if lending else idle
            queued, queued_gpus = waiting.get((name, slug), (0, 0))
            if not (nominal or used or queued):
                continue
            rows[slug].append(QueueRow(tenant=tenant_names.get(name, name), nominal=nominal,
                                       used=used, borrowed=borrowed, lendable=lendable,
                                       queued_workloads=queued, queued_gpus=queued_gpus,
                                       weighted_share=share))
    return dict(rows)


@admin_required
def queues(request: HttpRequest) -> HttpResponse:
    on = queueing_shown()
    context: dict[str, Any] = {"queueing": on, "sections": [], "error": None}
    if on:
        try:
            listed = Kube().list("ClusterQueue", label_selector=",".join(
                f"{k}={v}" for k, v in MANAGED_BY.items())).get("items") or []
        except KubeError as exc:
            listed, context["error"] = [], f"Kueue's queues cannot be read now: {exc}"
        waiting = {
            (row["tenant__namespace"], row["gpu_type__slug"]): (row["n"], row["gpus"] or 0)
            for row in Workload.objects.filter(state=Workload.State.QUEUED)
            .values("tenant__namespace", "gpu_type__slug")
            .annotate(n=Count("id"), gpus=Sum(GPU_TOTAL))}
        slugs = list(GpuType.objects.filter(enabled=True).order_by("slug")
                     .values_list("slug", flat=True))
        names = dict(Tenant.objects.values_list("namespace", "name"))
        context["sections"] = [
            {"slug": slug, "rows": per, "total": QueueRow(
                tenant="cohort", nominal=sum(r.nominal for r in per),
                used=sum(r.used for r in per), borrowed=sum(r.borrowed for r in per),
                lendable=sum(r.lendable for r in per),
                queued_workloads=sum(r.queued_workloads for r in per),
                queued_gpus=sum(r.queued_gpus for r in per))}
            for slug, per in queue_rows(listed, slugs, names, waiting).items()]
    waiting_list = list(Workload.objects.with_relations()
                        .filter(state=Workload.State.QUEUED, deleted_at__isnull=True)
                        .order_by("created_at", "pk")[:WAITING_SHOWN])
    annotate_queue(waiting_list)
    context["waiting_list"] = waiting_list
    context["reclaims"] = AuditRecord.objects.filter(action="workload.reclaim") \
        .select_related("tenant").order_by("-at")[:50]
    return render(request, "queueing/queues.html", context)
