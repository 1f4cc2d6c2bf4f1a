"""A tenant's quota as Kueue objects (made by kueue.py's pure functions; what its queue may reach
is QuotaFigures.reach). tenants/provisioning.py reconciles them where the cluster queues
(kube/kueue.py says whether it does)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from catalogue.models import GpuType
from catalogue.sharing import DRA, dra_type_class
from clusters.selectors import dispatch_workers

from .kueue import (
    COHORT,
    CohortSpec,
    FlavorSpec,
    QueueSpec,
    department_cohort,
    make_cluster_queue,
    make_department_cohort,
    make_dispatching_queues,
    make_local_queue,
    make_priority_classes,
    make_resource_flavors,
    make_worker_local_queue,
)
from .manifests import kueue_dra_resource
from .models import Department, Quota, Tenant
from .selectors import department_caps, department_quotas_in_force, quota_figures


def flavor_specs() -> list[FlavorSpec]:
    """A flavor per enabled GPU type; a DRA type's resource is the name Kueue counts its
    claims' devices under (its Configuration maps the type's own device class to it:
    kueue_dra_resource), one per type, so that each type's quota is held apart."""
    return [FlavorSpec(slug=t.slug, resource=(kueue_dra_resource(dra_type_class(t.slug))
                                              if t.sharing == DRA else t.resource_name),
                       node_labels=tuple(sorted((t.node_selector or {}).items())))
            for t in GpuType.objects.filter(enabled=True).order_by("slug")]


def queue_spec(tenant: Tenant, quota: Quota) -> QueueSpec:
    """The nominal quotas are the figures in force (tenants.selectors.quota_figures): a running
    reservation raises them, maintenance that leaves too few GPUs of a type in service lowers
    them, a hold in force (an exhausted hard budget) holds the queue."""
    figures = quota_figures(tenant, quota=quota)
    return QueueSpec(
        name=tenant.namespace, namespace=tenant.namespace,
        gpus=tuple(sorted(figures.in_force.gpus_by_type.items())),
        cpu=figures.in_force.cpu, memory_gb=figures.in_force.memory_gb,
        borrowing_limit=quota.gpu_borrowing_limit, lending_limit=quota.gpu_lending_limit,
        weight=f"{Decimal(str(quota.fair_share_weight)).normalize():f}",
        held=figures.held,
        cohort=(department_cohort(tenant.department_id) if tenant.department_id is not None
                else COHORT))


def cohort_spec(department: Department, flavors: list[FlavorSpec]) -> CohortSpec:
    """Per capped GPU type: the cap (DepartmentCaps.type_cap: its own, and what the cap in all
    leaves room for) less what its projects hold of their own (their quotas in force), never
    below none. Where their quotas together pass the cap, Kueue still admits each within its
    own quota (a quota is what a project is promised) and lends them nothing more."""
    caps = department_caps(department)
    own = department_quotas_in_force(department)
    borrowing = []
    for flavor in flavors:
        cap = caps.type_cap(flavor.slug)
        if cap is not None:
            borrowing.append((flavor.slug, max(cap - own.get(flavor.slug, 0), 0)))
    return CohortSpec(name=department_cohort(department.pk), borrowing=tuple(borrowing))


def cluster_queueing_objects() -> list[dict[str, Any]]:
    """The cluster-wide objects: a ResourceFlavor per GPU type, the priority classes."""
    return make_resource_flavors(flavor_specs()) + make_priority_classes()


def tenant_queue_objects(tenant: Tenant, quota: Quota, *,
                         cluster: str | None = None) -> list[dict[str, Any]]:
    """A tenant's department's Cohort (where it is in one: before the queue that names it), its
    ClusterQueue and the LocalQueue in its namespace, in `cluster` (None: the home cluster, the
    manager, where per worker the queues dispatching to it come too; a worker's name: there,
    with the LocalQueue the manager's copies name as well)."""
    spec, flavors = queue_spec(tenant, quota), flavor_specs()
    cohort = ([make_department_cohort(cohort_spec(tenant.department, flavors), flavors)]
              if tenant.department is not None else [])
    objects = [*cohort, make_cluster_queue(spec, flavors), make_local_queue(spec)]
    if cluster is not None:
        return [*objects, make_worker_local_queue(spec, cluster)]
    for worker in dispatch_workers():
        objects += make_dispatching_queues(spec, flavors, worker)
    return objects
