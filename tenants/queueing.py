"""A tenant's quota as Kueue objects (made by kueue.py's pure functions), and what its queue
may reach. tenants/provisioning.py reconciles them where the cluster queues
(kube/kueue.py says whether it does)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from catalogue.models import GpuType

from .kueue import (
    FlavorSpec,
    QueueSpec,
    make_cluster_queue,
    make_local_queue,
    make_priority_classes,
    make_resource_flavors,
)
from .models import Quota, Tenant


def flavor_specs() -> list[FlavorSpec]:
    return [FlavorSpec(slug=t.slug, resource=t.resource_name,
                       node_labels=tuple(sorted((t.node_selector or {}).items())))
            for t in GpuType.objects.filter(enabled=True).order_by("slug")]


def queue_spec(tenant: Tenant, quota: Quota) -> QueueSpec:
    """The nominal quotas are the figures in effect: a running reservation raises them."""
    figures = quota.effective()
    return QueueSpec(
        name=tenant.namespace, namespace=tenant.namespace,
        gpus=tuple(sorted(figures.gpus_by_type.items())),
        cpu=figures.cpu, memory_gb=figures.memory_gb,
        borrowing_limit=quota.gpu_borrowing_limit, lending_limit=quota.gpu_lending_limit,
        weight=f"{Decimal(str(quota.fair_share_weight)).normalize():f}",
        held=bool(quota.queue_held_reason))


def cluster_queueing_objects() -> list[dict[str, Any]]:
    """The cluster-wide objects: a ResourceFlavor per GPU type, the priority classes."""
    return make_resource_flavors(flavor_specs()) + make_priority_classes()


def tenant_queue_objects(tenant: Tenant, quota: Quota) -> list[dict[str, Any]]:
    """A tenant's ClusterQueue and the LocalQueue in its namespace."""
    spec = queue_spec(tenant, quota)
    return [make_cluster_queue(spec, flavor_specs()), make_local_queue(spec)]


def gpu_reach(quota: Quota, gpu_slug: str) -> int | None:
    """The most GPUs of a type the tenant's queue can hold at once now: its nominal quota (with
    what running reservations add) plus what it may borrow (None: no borrowing limit, so only
    the cluster's size bounds it)."""
    if quota.gpu_borrowing_limit is None:
        return None
    return quota.effective().gpus_by_type.get(gpu_slug, 0) + quota.gpu_borrowing_limit
