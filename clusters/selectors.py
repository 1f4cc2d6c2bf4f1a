"""Reads of the clusters: which a caller sees, a cluster by name, each one's capacity from its
own read model (cluster.capacity) and the GPU types it offers."""

from __future__ import annotations

import logging
from collections.abc import Collection

from django.db.models import QuerySet

from cluster.capacity import GpuTypeCapacity, gpu_capacity
from identity.identity import Identity
from kube.client import KubeError
from kube.hooks import ClusterConnection

from .models import Cluster

log = logging.getLogger(__name__)


def clusters_visible(identity: Identity) -> QuerySet[Cluster]:
    """Every cluster for an admin; the enabled ones for everyone else signed in."""
    clusters = Cluster.objects.all()
    return clusters if identity.is_admin else clusters.filter(enabled=True)


def cluster_home() -> Cluster:
    """The cluster the portal runs beside (made by the first migration)."""
    return Cluster.objects.get(home=True)


def cluster_named(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def dispatch_workers() -> list[str]:
    """The worker clusters the home cluster dispatches batch work to through MultiKueue:
    every enabled cluster other than the home one (docs/multicluster.md: a cluster registered
    here is registered as a MultiKueue worker of the home cluster's Kueue as well)."""
    return list(Cluster.objects.filter(enabled=True, home=False).order_by("name")
                .values_list("name", flat=True))


def cluster_connection(name: str) -> ClusterConnection | None:
    """The Kubernetes client's entry (kube.hooks.CLUSTER_CONNECTIONS): where an enabled
    cluster's credentials are."""
    found = Cluster.objects.filter(name=name, enabled=True, home=False).values_list(
        "kubeconfig_path", "kubeconfig_secret").first()
    if found is None:
        return None
    return ClusterConnection(name=name, kubeconfig=found[0], secret=found[1])


def cluster_capacity(cluster: Cluster) -> dict[str, GpuTypeCapacity] | None:
    """Per GPU type slug the cluster's capacity, held and free GPUs from its read model; None
    while it is disabled, unreachable (as its probe last saw it: its read model is not waited
    for) or does not answer now."""
    if not cluster.enabled or (not cluster.home and cluster.state != Cluster.State.READY):
        return None
    try:
        return gpu_capacity(cluster=None if cluster.home else cluster.name)
    except KubeError as exc:
        log.info("cluster %s: capacity not read (%s)", cluster.name, exc)
        return None


def gpu_types_offered(cluster: Cluster, capacity: dict[str, GpuTypeCapacity] | None
                      ) -> dict[str, int]:
    """The GPU types a cluster offers, with its capacity of each (0 while it is not read): those
    its admin named, else every type its nodes carry."""
    capacity = capacity or {}
    if cluster.gpu_types:
        return {slug: capacity[slug].capacity if slug in capacity else 0
                for slug in cluster.gpu_types}
    return {slug: figures.capacity for slug, figures in sorted(capacity.items())
            if figures.capacity}


def cluster_offers(cluster: Cluster, slug: str,
                   capacity: dict[str, GpuTypeCapacity] | None) -> bool:
    return slug in gpu_types_offered(cluster, capacity)


def clusters_usable_by(allowed: Collection[str]) -> list[Cluster]:
    """The enabled clusters a project's workloads may run on (`allowed`: the names it is
    limited to; empty: every one), the home cluster first."""
    return [cluster for cluster in Cluster.objects.filter(enabled=True)
            if not allowed or cluster.name in allowed]


def cluster_place(*, allowed: Collection[str], slug: str, gpus: int) -> Cluster | None:
    """Where a service goes when its launch names no cluster: the first cluster the project
    may use that answers, offers the type and has `gpus` of it free, the home cluster first;
    where none has room, the first that offers the type (it waits there for GPUs); None when
    no cluster the project may use offers it. An unreachable cluster is passed over: its
    figures are not known, and what is launched there would not start."""
    fallback = None
    for cluster in clusters_usable_by(allowed):
        if not cluster.home and cluster.state != Cluster.State.READY:
            continue
        capacity = cluster_capacity(cluster)
        # the home cluster offers what its nodes carry, even while its figures are not read
        if (cluster.gpu_types or not cluster.home) and not cluster_offers(
                cluster, slug, capacity):
            continue
        figures = (capacity or {}).get(slug)
        if figures is not None and figures.free >= gpus:
            return cluster
        fallback = fallback or cluster
    return fallback


def clusters_unreachable() -> dict[str, str]:
    """The enabled clusters other than the home one that do not answer, with the reason, as
    their probe last saw them: their workloads' states are unknown meanwhile (the home
    cluster's outage is every page's banner, and the tracker's figures stand)."""
    return dict(Cluster.objects.filter(enabled=True, home=False,
                                       state=Cluster.State.UNREACHABLE)
                .values_list("name", "reason"))


def clusters_capacity_by_type(home: dict[str, GpuTypeCapacity] | None
                              ) -> dict[str, dict[str, dict[str, int]]]:
    """Per GPU type slug, per enabled cluster that offers it: {capacity, free} (the GPU
    types' API). `home`: the home cluster's figures, which the caller read already (None
    when they could not be read). A cluster whose figures cannot be read now is left out."""
    by_type: dict[str, dict[str, dict[str, int]]] = {}
    for cluster in Cluster.objects.filter(enabled=True):
        capacity = home if cluster.home else cluster_capacity(cluster)
        if capacity is None:
            continue
        for slug in gpu_types_offered(cluster, capacity):
            figures = capacity.get(slug)
            if figures is not None:
                by_type.setdefault(slug, {})[cluster.name] = {
                    "capacity": figures.capacity, "free": figures.free}
    return by_type
