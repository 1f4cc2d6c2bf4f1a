"""The admin's cluster pages, under /admin/clusters/ (admin_urls.py): every cluster with its
state, and one cluster's nodes, GPUs and health from its own read model, with its form."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from cluster.capacity import cluster_nodes
from identity.access import SignedInRequest, admin_required
from kube.client import KubeError
from kube.quantity import parse_quantity

from .forms import ClusterForm
from .models import Cluster
from .selectors import cluster_capacity, gpu_types_offered
from .services import ClusterInvalid, cluster_register, cluster_update


@dataclasses.dataclass(frozen=True)
class NodeRow:
    name: str
    ready: bool
    cordoned: bool
    gpus: str  # "8× nvidia.com/gpu", or "—"


def node_rows(nodes: list[dict[str, Any]]) -> list[NodeRow]:
    rows = []
    for node in nodes:
        status = node.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        gpus = ", ".join(f"{int(parse_quantity(amount))}× {name}"
                         for name, amount in sorted((status.get("capacity") or {}).items())
                         if name.startswith("nvidia.com/") and parse_quantity(amount))
        rows.append(NodeRow(name=(node.get("metadata") or {}).get("name") or "", ready=ready,
                            cordoned=bool((node.get("spec") or {}).get("unschedulable")),
                            gpus=gpus or "—"))
    return sorted(rows, key=lambda row: row.name)


@admin_required
def cluster_list(request: SignedInRequest) -> HttpResponse:
    clusters = list(Cluster.objects.all())
    rows = [(cluster, gpu_types_offered(cluster, cluster_capacity(cluster)))
            for cluster in clusters]
    return render(request, "clusters/cluster_list.html", {"rows": rows})


@admin_required
@require_http_methods(["GET", "POST"])
def cluster_new(request: SignedInRequest) -> HttpResponse:
    form = ClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = cluster_register(user=request.user, fields=form.fields_given())
        except ClusterInvalid as exc:
            for field, errors in exc.errors.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Cluster {cluster.name} registered; its probe checks "
                                      "it now.")
            return redirect("clusters:detail", pk=cluster.pk)
    return render(request, "clusters/cluster_form.html", {"form": form},
                  status=400 if form.errors else 200)


@admin_required
@require_http_methods(["GET", "POST"])
def cluster_detail(request: SignedInRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    form = ClusterForm(request.POST or None, cluster=cluster)
    if request.method == "POST" and form.is_valid():
        try:
            cluster_update(user=request.user, cluster=cluster, changes=form.fields_given())
        except ClusterInvalid as exc:
            for field, errors in exc.errors.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Cluster {cluster.name} saved.")
            return redirect("clusters:detail", pk=cluster.pk)
    capacity = cluster_capacity(cluster)
    nodes: list[NodeRow] | None = None
    if capacity is not None:
        try:
            nodes = node_rows(cluster_nodes(None if cluster.home else cluster.name))
        except KubeError:
            nodes = None
    figures = [capacity[slug] for slug in gpu_types_offered(cluster, capacity)
               if capacity and slug in capacity]
    return render(request, "clusters/cluster_detail.html", {
        "cluster": cluster, "form": form, "nodes": nodes, "figures": figures,
    }, status=400 if form.errors else 200)
