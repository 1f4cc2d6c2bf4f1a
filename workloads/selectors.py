"""Reads of the workload domain: the tenant filter, who may change or read what, and the
launch page's GPU availability (the cluster's figures come from cluster.capacity)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum

from catalogue.models import GpuType
from catalogue.sharing import equivalents_text
from cluster.addresses import address_pools
from cluster.capacity import GpuTypeCapacity, gpu_capacity
from clusters.models import home_cluster_name
from clusters.selectors import clusters_unreachable
from identity.client import Project
from identity.identity import Identity
from identity.scoping import Action
from kube.client import Kube, KubeError
from storage.models import Dataset, Volume
from tenants.figures import USE_ADMISSION, QuotaFigures, QuotaUse
from tenants.models import Department, Quota, Tenant
from tenants.selectors import department_caps, department_quotas_in_force, quota_figures

from .models import Workload, WorkloadMount
from .querysets import CPU_TOTAL, GPU_TOTAL, MEMORY_TOTAL


def workload_project_elsewhere(identity: Identity | None, pk: int) -> Project | None:
    """The caller's other project that workload `pk` belongs to, or None: for a link to a
    workload of one of their projects that is not the current one (the page offers to switch).
    Another user's project, a deleted workload or no workload at all: None alike, so the
    answer is the same 404 and says nothing."""
    if identity is None or not identity.projects:
        return None
    project_id = (Workload.objects.filter(pk=pk, deleted_at__isnull=True)
                  .values_list("tenant__keystone_project_id", flat=True).first())
    current = identity.project.id if identity.project is not None else None
    if project_id is None or project_id == current:
        return None
    return next((p for p in identity.projects if p.id == project_id), None)


def workload_may_change(identity: Identity | None, workload: Workload) -> bool:
    """Members change their own workloads, managers (and admins) every one of the project
    (`Workload.objects.restrict(identity, "change")`, for a row in hand)."""
    return Workload.objects.permits(identity, Action.CHANGE, workload)


def workload_may_see_secrets(identity: Identity | None, workload: Workload) -> bool:
    """Who reads a workload's access token, and the log lines, events and arguments that may
    carry one: those who may manage it (owner, the project's managers, admins). Other members
    and readers see that it runs, not how to get in (workloads/logs.py redacts)."""
    return workload_may_change(identity, workload)


@dataclasses.dataclass
class GpuAvailability:
    """One GPU type as the launch page and the dashboard show it."""

    gpu_type: GpuType
    quota_limit: int  # the tenant's quota in force for this type
    quota_used: int  # GPUs of this type the tenant's active workloads hold
    total_limit: int  # the tenant's quota of GPUs in all (GPU-equivalents)
    total_used: Fraction  # GPU-equivalents: units × their type's part of a GPU
    allocatable: int | None = None  # None: the cluster was not asked or did not answer
    free: int | None = None
    largest_node: int | None = None
    # the capacity view's (its nodes_offering / nodes_free check a group of nodes); None
    # when the cluster was not asked or did not answer
    capacity: GpuTypeCapacity | None = None
    # what adjusts the type's quota now, in words (QuotaFigures.adjusted_text), or ""
    adjusted: str = ""

    @property
    def known(self) -> bool:
        return self.allocatable is not None

    @property
    def total_used_text(self) -> str:
        return equivalents_text(self.total_used)

    @property
    def may_use(self) -> int:
        """How many more units of this type the quota admits (per type, and in all: the
        GPU-equivalents left over the part of a GPU a unit is)."""
        room = (self.total_limit - self.total_used) / self.gpu_type.gpu_fraction
        return max(min(self.quota_limit - self.quota_used, math.floor(room)), 0)


def gpus_held_by_type(workloads: QuerySet[Workload]) -> dict[str, int]:
    """GPUs per type slug that these workloads were admitted with (quota use, not the
    cluster's held GPUs: those are cluster.capacity's)."""
    return dict(workloads.order_by().values_list("gpu_type__slug").annotate(n=Sum(GPU_TOTAL)))


def _use_rows(tenant: Tenant) -> QuerySet[Workload, dict[str, Any]]:
    """The tenant's active, not deleted workloads summed per GPU type and state (every node's
    share): what admission counts as used."""
    return _summed(Workload.objects.filter(tenant=tenant))


def _summed(workloads: QuerySet[Workload]) -> QuerySet[Workload, dict[str, Any]]:
    """These workloads' active, not deleted ones summed per GPU type and state."""
    return (workloads.filter(state__in=Workload.ACTIVE_STATES, deleted_at__isnull=True)
            .order_by().values("gpu_type__slug", "state")
            .annotate(gpus=Sum(GPU_TOTAL), cpu=Sum(CPU_TOTAL), memory=Sum(MEMORY_TOTAL),
                      n=Count("id")))


def _quota_use_of(rows: Iterable[dict[str, Any]]) -> QuotaUse:
    gpus: dict[str, int] = {}
    cpu = memory = count = 0
    for row in rows:
        slug = row["gpu_type__slug"]
        gpus[slug] = gpus.get(slug, 0) + (row["gpus"] or 0)
        cpu += row["cpu"] or 0
        memory += row["memory"] or 0
        count += row["n"]
    return QuotaUse(source=USE_ADMISSION, gpus_by_type=gpus, cpu=cpu, memory_gb=memory,
                    workloads=count)


def department_use(department: Department, *,
                   fractions: Mapping[str, Fraction]) -> QuotaUse:
    """What a department's projects use together as admission counts it (their active, not
    deleted workloads); `fractions`: the part of a GPU a unit of each type is. One query."""
    rows = _summed(Workload.objects.filter(tenant__department=department))
    return dataclasses.replace(_quota_use_of(rows), fractions=dict(fractions))


def department_refusal(tenant: Tenant, department: Department, *, slug: str, wanted: int,
                       queued: bool) -> str | None:
    """Why the department's cap leaves no room for `wanted` more units of `slug` for one of its
    projects (None: it does, or nothing is capped). With queueing on Kueue the department's
    Cohort holds its projects within the cap (tenants/queueing.py cohort_spec): refused is only
    a launch that alone weighs more than the department could ever hold of its type (the cap,
    or its projects' own quotas where those together pass it). The admission asks it under the
    department's lock; the launch check without one."""
    caps = department_caps(department)
    if not caps.capped:
        return None
    if queued:
        cap = caps.type_cap(slug)
        own = department_quotas_in_force(department).get(slug, 0)
        if cap is not None and wanted > max(cap, own):
            return (f"{department.name}, the department of {tenant.name}, may hold at most "
                    f"{max(cap, own)} {slug} GPUs together; {wanted} can never be admitted.")
        return None
    used = department_use(department, fractions=caps.fractions)
    cap = caps.gpus_by_type.get(slug)
    if cap is not None and used.gpus(slug) + wanted > cap:
        return (f"{department.name}, the department of {tenant.name}, holds {used.gpus(slug)} "
                f"of its cap of {cap} {slug} GPUs; {wanted} more would exceed it.")
    weight = wanted * caps.fraction(slug)
    if caps.gpus_total is not None and used.gpus_total + weight > caps.gpus_total:
        return (f"{department.name}, the department of {tenant.name}, holds "
                f"{equivalents_text(used.gpus_total)} of its cap of {caps.gpus_total} GPUs in "
                f"all; {equivalents_text(weight)} more would exceed it.")
    return None


def quota_use(tenant: Tenant) -> QuotaUse:
    """What the tenant uses of its quota as the portal's admission counts it (source
    USE_ADMISSION): its active, not deleted workloads, every node's share. One query."""
    return _quota_use_of(_use_rows(tenant))


@dataclasses.dataclass(frozen=True)
class TenantGpuReads:
    """What a tenant's GPU figures are read from, once per request: its quota figures in force
    with their use, the GPUs its workloads hold per type and state, the catalogue's GPU types
    and the cluster's capacity view of them."""

    figures: QuotaFigures  # with `used` (quota_use's)
    gpu_types: tuple[GpuType, ...]  # every type of the catalogue, in its order
    # {(GPU type slug, state): GPUs} of the tenant's active, not deleted workloads
    held_by_state: dict[tuple[str, str], int]
    capacity: dict[str, GpuTypeCapacity] | None  # None: the cluster was not asked or did not answer
    cluster_error: str | None = None

    @property
    def used(self) -> QuotaUse:
        assert self.figures.used is not None
        return self.figures.used

    def held_of(self, slug: str, states: Iterable[str] = Workload.ACTIVE_STATES) -> int:
        """GPUs of the type the tenant's workloads in `states` hold (the active ones: what
        admission counts)."""
        wanted = set(states)
        return sum(gpus for (held_slug, state), gpus in self.held_by_state.items()
                   if held_slug == slug and state in wanted)

    def type_capacity(self, slug: str) -> GpuTypeCapacity | None:
        return self.capacity.get(slug) if self.capacity is not None else None


def tenant_gpu_reads(tenant: Tenant, quota: Quota | None = None, *, ask_cluster: bool = True
                     ) -> TenantGpuReads:
    """The reads above (quota: the tenant's, when the caller has it in hand): the quota
    figures and their use in one query of the workloads, the GPU types once for the capacity
    view and the caller's rows."""
    capacity, cluster_error = None, None
    types = list(GpuType.objects.all())
    if ask_cluster:
        try:
            capacity = gpu_capacity(types)
        except KubeError as exc:
            cluster_error = str(exc) or type(exc).__name__
    rows = list(_use_rows(tenant))
    return TenantGpuReads(
        figures=quota_figures(tenant, quota=quota, used=_quota_use_of(rows)),
        gpu_types=tuple(types),
        held_by_state={(row["gpu_type__slug"], row["state"]): row["gpus"] or 0 for row in rows},
        capacity=capacity, cluster_error=cluster_error)


def gpu_availability(tenant: Tenant, quota: Quota | None, *, ask_cluster: bool = True,
                     reads: TenantGpuReads | None = None
                     ) -> tuple[list[GpuAvailability], str | None]:
    """Per enabled GPU type: the tenant's quota use and (asking the cluster) free GPUs.

    Free is the capacity view's (cluster.capacity), as `GET gpu-types/` answers.
    The quota is the one in force (tenants.selectors.quota_figures), its use what admission
    counts (quota_use). Returns (rows, the cluster's error when it did not answer, else
    None). `reads`: the tenant's GPU reads when the caller has them."""
    reads = reads or tenant_gpu_reads(tenant, quota, ask_cluster=ask_cluster)
    figures, used = reads.figures, reads.used
    rows = []
    for gpu_type in (t for t in reads.gpu_types if t.enabled):
        row = GpuAvailability(gpu_type=gpu_type, quota_limit=figures.gpus(gpu_type.slug),
                              quota_used=used.gpus(gpu_type.slug),
                              total_limit=figures.in_force.gpus_total,
                              total_used=used.gpus_total,
                              adjusted=figures.adjusted_text(gpu_type.slug))
        cap = reads.type_capacity(gpu_type.slug)
        if cap is not None:
            row.allocatable = cap.allocatable
            row.largest_node = cap.largest_node
            row.free = cap.free
            row.capacity = cap
        rows.append(row)
    return rows, reads.cluster_error


def workloads_admitted() -> list[tuple[int, str, int]]:
    """(id, GPU type slug, GPUs) of every admitted, active workload of the home cluster: the
    capacity view's "admitted" source (cluster.capacity; registered in apps.py), which counts
    the home cluster's only (another cluster's are not its GPUs)."""
    return list(Workload.objects.filter(state__in=Workload.ACTIVE_STATES,
                                        cluster=home_cluster_name()).order_by()
                .annotate(gpus=GPU_TOTAL).values_list("pk", "gpu_type__slug", "gpus"))


@dataclasses.dataclass(frozen=True)
class ServiceAddresses:
    """What a service launch may count on for its own address (PORTAL_SERVICE_EXPOSURE=
    loadbalancer): the pools' free addresses less the services admitted before it that have
    none yet (each takes the next one freed). `known` False: no pools to read (another load
    balancer, or the shared-address mode, where a service needs no address of its own)."""

    known: bool
    total: int = 0
    free: int = 0  # free in the pools now
    waiting: int = 0  # the portal's live services without an address

    @property
    def available(self) -> int:
        return max(self.free - self.waiting, 0)

    @property
    def exhausted(self) -> bool:
        return self.known and self.available == 0


def service_addresses(cluster: str | None = None) -> ServiceAddresses:
    """The addresses left for service launches on a cluster (above; the home cluster's by
    default); asks the cluster at most every cluster.addresses.POOLS_SECONDS."""
    if settings.PORTAL_SERVICE_EXPOSURE != "loadbalancer":
        return ServiceAddresses(known=False)
    cluster = cluster or home_cluster_name()
    try:
        kube = Kube(cluster=cluster)
        pools = address_pools(kube)
    except KubeError:
        return ServiceAddresses(known=False)
    if not pools.known:
        return ServiceAddresses(known=False)
    State = Workload.State
    waiting = Workload.objects.filter(
        kind="service", address="", deleted_at__isnull=True, cluster=cluster,
        state__in=(State.SUBMITTED, State.CREATING, State.QUEUED, State.PENDING, State.RUNNING),
    ).count()
    return ServiceAddresses(known=True, total=pools.total, free=pools.free, waiting=waiting)


def volume_users(*, volume: Volume) -> list[str]:
    """The workloads not yet finished that mount `volume`, by name and id (storage's
    VOLUME_USERS: such a volume is not deleted)."""
    rows = (WorkloadMount.objects.filter(volume=volume)
            .exclude(workload__state__in=Workload.FINAL_STATES)
            .values_list("workload_id", "workload__name").distinct())
    return [f"#{pk} {name}" for pk, name in rows]


def dataset_users(*, dataset: Dataset, tenants: list[Tenant] | None) -> list[str]:
    """The workloads not yet finished that mount `dataset` (in `tenants`; None: in any), by
    name and id (storage's DATASET_USERS: the dataset is not deleted or closed to them)."""
    rows = WorkloadMount.objects.filter(dataset=dataset).exclude(
        workload__state__in=Workload.FINAL_STATES)
    if tenants is not None:
        rows = rows.filter(workload__tenant__in=tenants)
    return [f"#{pk} {name} ({project})" for pk, name, project in rows.values_list(
        "workload_id", "workload__name", "workload__tenant__name").distinct()]


def runs_between(start: dt.datetime, end: dt.datetime) -> QuerySet[Workload]:
    """Every workload that ran in [start, end] (deleted ones too: they were used), unordered:
    what budgets count and billing charges, with querysets.run_within."""
    return (Workload.objects.filter(started_at__isnull=False, started_at__lt=end)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start)).order_by())


def annotate_clusters(workloads: Iterable[Workload]) -> None:
    """Each workload's `cluster_outage`: why its cluster does not answer (its probe's reason),
    for the state shown (Workload.shown_state); one query for all of them."""
    unreachable = clusters_unreachable()
    for workload in workloads:
        workload.cluster_outage = unreachable.get(workload.cluster)
