"""Reads of the tenants domain. What a caller may see of tenants is `Tenant.objects.restrict`
(identity/scoping.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from fractions import Fraction

from django.conf import settings
from django.db.models import CharField, DateTimeField, F, Q, QuerySet, Value
from django.utils import timezone

from catalogue.models import GpuType
from cluster.capacity import gpus_in_use_by_namespace
from clusters.models import home_cluster_name
from identity.identity import Identity

from .figures import (
    USE_ADMISSION,
    USE_CLUSTER,
    AdjustmentLine,
    DepartmentCaps,
    DepartmentStanding,
    QuotaAmounts,
    QuotaFigures,
    QuotaUse,
    figures_of,
)
from .hooks import DEPARTMENT_USE
from .manifests import enforced_level, level_admits_root
from .models import (
    Department,
    DepartmentGpuCap,
    GpuQuota,
    Quota,
    QuotaAdjustment,
    Tenant,
    TenantCluster,
    prefetched_or,
)

# what to prefetch from Tenant for quota_figures to read nothing more (a page of tenants)
QUOTA_FIGURES_PREFETCH = ("quota__gpu_limits__gpu_type", "quota__adjustments__gpu_type")


def tenant_pod_security(tenant: Tenant) -> str:
    """The Pod Security level the tenant's namespace enforces (PORTAL_POD_SECURITY_ENFORCE,
    "baseline" instead of "restricted" where an admin allows root templates)."""
    return enforced_level(settings.PORTAL_POD_SECURITY_ENFORCE,
                          allow_root=tenant.allow_root_templates)


def tenant_admits_root(tenant: Tenant) -> bool:
    """Whether a template that may run as root can run in the tenant's namespace."""
    return level_admits_root(tenant_pod_security(tenant))


def tenant_current(identity: Identity | None) -> Tenant | None:
    """The tenant of the identity's current project (None: none, or not yet known). The
    request's tenant (tenants/middleware.py, api/authentication.py) comes from here."""
    if identity is None or identity.project is None:
        return None
    return (Tenant.objects.select_related("quota")
            .filter(keystone_project_id=identity.project.id).first())


# --- the quota's figures ----------------------------------------------------------------------

def tenants_administered(identity: Identity | None) -> QuerySet[Tenant]:
    """The projects `identity` acts for as a department admin: those of the departments it
    administers (tenants/querysets.py's rule; admins: every project)."""
    if identity is not None and identity.is_admin:
        return Tenant.objects.all()
    return Tenant.objects.filter(department__in=Department.objects.administered_by(identity))


def tenants_reachable(identity: Identity | None) -> QuerySet[Tenant]:
    """The projects whose records, requests and reports `identity` reaches: its current
    project's (by its role there), and every project of the departments it administers."""
    own = Tenant.objects.restrict(identity, "view").values("pk")
    administered = tenants_administered(identity).values("pk")
    return Tenant.objects.filter(Q(pk__in=own) | Q(pk__in=administered))


def adjustment_line(row: QuotaAdjustment) -> AdjustmentLine:
    return AdjustmentLine(source=row.source, kind=row.kind,
                          gpu_type=row.gpu_type.slug if row.gpu_type is not None else None,
                          gpus=row.gpus, reason=row.reason, ref=row.ref,
                          starts_at=row.starts_at, ends_at=row.ends_at)


def quota_adjustment_lines(quota: Quota) -> list[AdjustmentLine]:
    """Every adjustment row of the quota (in force or not), as prefetched where it was."""
    return [adjustment_line(row) for row in prefetched_or(quota, "adjustments", "gpu_type")]


# what a row of `_limits_and_lines` holds: 0 a GPU limit, 1 an adjustment; in the adjustments'
# order (the model's)
ROW_FIELDS = ("part", "source", "ref", "pk", "slug", "gpus", "kind", "reason", "starts_at",
              "ends_at", "num", "den")


def _fractions(quota: Quota) -> dict[str, Fraction]:
    """The part of a GPU a unit of each type the quota names is, as prefetched."""
    types = [row.gpu_type for row in prefetched_or(quota, "gpu_limits", "gpu_type")] + \
        [row.gpu_type for row in prefetched_or(quota, "adjustments", "gpu_type")
         if row.gpu_type is not None]
    return {t.slug: t.gpu_fraction for t in types}


def _limits_and_lines(quota: Quota) -> tuple[dict[str, int], list[AdjustmentLine],
                                             dict[str, Fraction]]:
    """The quota's GPUs per type as set (Quota.gpus_by_type), its adjustment rows
    (quota_adjustment_lines) and the part of a GPU a unit of each type they name is: as
    prefetched where the caller prefetched both, else read in one query of both (the launch
    check reads them at every keystroke), the adjustments in their model's order."""
    if {"gpu_limits", "adjustments"} <= set(getattr(quota, "_prefetched_objects_cache", {})):
        return quota.gpus_by_type(), quota_adjustment_lines(quota), _fractions(quota)
    blank, no_time = Value("", output_field=CharField()), Value(None, DateTimeField())
    num, den = F("gpu_type__fraction_numerator"), F("gpu_type__fraction_denominator")
    limits = GpuQuota.objects.filter(quota=quota).annotate(
        part=Value(0), source=blank, ref=blank, slug=F("gpu_type__slug"), kind=blank,
        reason=blank, starts_at=no_time, ends_at=no_time, num=num, den=den,
    ).order_by().values_list(*ROW_FIELDS)
    adjustments = QuotaAdjustment.objects.filter(quota=quota).annotate(
        part=Value(1), slug=F("gpu_type__slug"), num=num, den=den,
    ).order_by().values_list(*ROW_FIELDS)
    by_type: dict[str, int] = {}
    lines: list[AdjustmentLine] = []
    fractions: dict[str, Fraction] = {}
    for part, source, ref, _, slug, gpus, kind, reason, starts_at, ends_at, numerator, \
            denominator in limits.union(adjustments, all=True).order_by(*ROW_FIELDS[:4]):
        if slug is not None and numerator is not None:
            fractions[slug] = Fraction(numerator, denominator)
        if part == 0:
            by_type[slug] = gpus
        else:
            lines.append(AdjustmentLine(source=source, kind=kind, gpu_type=slug, gpus=gpus,
                                        reason=reason, ref=ref, starts_at=starts_at,
                                        ends_at=ends_at))
    return by_type, lines, fractions


def quota_figures(tenant: Tenant, *, quota: Quota | None = None, used: QuotaUse | None = None,
                  now: dt.datetime | None = None) -> QuotaFigures:
    """The tenant's quota figures now (tenants/figures.py): nominal, the adjustments in force,
    in force, and `used` as the caller read it (workloads.selectors.quota_use: the portal's
    rows, as admission counts; quota_uses_in_cluster: the namespace's pods).

    `quota`: the tenant's quota row in hand (e.g. locked by admission), else tenant.quota.
    One query (its GPU limits and its adjustments), none where QUOTA_FIGURES_PREFETCH was
    prefetched."""
    quota = quota if quota is not None else tenant.quota
    default_gpus = max(settings.PORTAL_DEFAULT_QUOTA_GPUS_TOTAL, 1)
    by_type, lines, fractions = _limits_and_lines(quota)
    nominal = QuotaAmounts(gpus_by_type=by_type, gpus_total=quota.gpus_total,
                           cpu=quota.cpu, memory_gb=quota.memory_gb,
                           storage_gib=quota.storage_gib, volumes=quota.volumes)
    return figures_of(
        tenant_name=tenant.name, nominal=nominal, lines=lines,
        now=now or timezone.now(),
        default_share=(settings.PORTAL_DEFAULT_QUOTA_CPU / default_gpus,
                       settings.PORTAL_DEFAULT_QUOTA_MEMORY_GB / default_gpus),
        max_workloads=quota.max_workloads, max_runtime_minutes=quota.max_runtime_minutes,
        borrowing_limit=quota.gpu_borrowing_limit, used=used, fractions=fractions)


def tenants_with_quota_figures(tenants: QuerySet[Tenant]) -> QuerySet[Tenant]:
    """`tenants` with what quota_figures reads, in three queries for all of them."""
    return tenants.select_related("quota").prefetch_related(*QUOTA_FIGURES_PREFETCH)


def tenants_adjusted_by(source: str) -> QuerySet[Tenant]:
    """The tenants with rows of `source` (in force or not): those its writer must look at
    again, to keep or remove them."""
    return Tenant.objects.filter(
        pk__in=QuotaAdjustment.objects.filter(source=source).values("quota__tenant"))


def quota_uses_in_cluster(tenants: Iterable[Tenant]) -> dict[int, QuotaUse]:
    """{tenant id: the GPUs its namespace's pods request} (source USE_CLUSTER), in one read of
    the cluster's cache; raises KubeError when the cluster cannot be read."""
    tenants = list(tenants)
    usage = gpus_in_use_by_namespace({t.namespace for t in tenants})
    return {t.pk: QuotaUse(source=USE_CLUSTER, gpus_by_type=dict(usage.get(t.namespace, {})))
            for t in tenants}


def department_caps(department: Department) -> DepartmentCaps:
    """What the department's projects may hold together (its row in hand, e.g. locked by
    admission), with the part of a GPU a unit of each type is. Two queries."""
    by_type = dict(DepartmentGpuCap.objects.filter(department=department)
                   .values_list("gpu_type__slug", "gpus"))
    fractions = {slug: Fraction(numerator, denominator) for slug, numerator, denominator in
                 GpuType.objects.values_list("slug", "fraction_numerator",
                                             "fraction_denominator")}
    return DepartmentCaps(name=department.name, gpus_total=department.gpu_cap,
                          gpus_by_type=by_type, fractions=fractions)


def department_members(department: Department) -> QuerySet[Tenant]:
    """Its projects that have a queue on the cluster (all but the deleted ones)."""
    return Tenant.objects.filter(department=department).exclude(state=Tenant.State.DELETED)


def _department_quotas(department: Department) -> tuple[dict[str, int], int]:
    """Its projects' quotas in force together: per GPU type slug, and their totals."""
    together: dict[str, int] = {}
    total = 0
    for tenant in tenants_with_quota_figures(department_members(department)):
        in_force = quota_figures(tenant).in_force
        total += in_force.gpus_total
        for slug, gpus in in_force.gpus_by_type.items():
            together[slug] = together.get(slug, 0) + gpus
    return together, total


def department_quotas_in_force(department: Department) -> dict[str, int]:
    """Per GPU type slug: its projects' quotas in force together (what they hold of their own
    in Kueue's cohort tree, whatever the department's cap). Three queries."""
    return _department_quotas(department)[0]


def department_standing(department: Department) -> DepartmentStanding:
    """What its projects use now (units per type; GPU-equivalents in all) against its caps,
    their quotas in force together and what is left: the use read through DEPARTMENT_USE, the
    reader the admission checks a cap with (no count of its own here). Six queries."""
    caps = department_caps(department)
    readers = list(DEPARTMENT_USE)
    used = (readers[0](department, fractions=caps.fractions) if readers
            else QuotaUse(source=USE_ADMISSION, gpus_by_type={}, fractions=caps.fractions))
    by_type, total = _department_quotas(department)
    slugs = sorted(set(caps.fractions) | set(used.gpus_by_type) | set(by_type))
    return DepartmentStanding(caps=caps, used=used, quotas_by_type=by_type,
                              quotas_total=total, gpu_types=tuple(slugs))


def tenant_cluster_states(tenant: Tenant) -> list[dict[str, object]]:
    """How the tenant's namespace is on each cluster, as its last reconcile there found it:
    the home cluster's (the tenant's own state) first, then every other cluster's row
    (tenants/provisioning.py) by name. {cluster, state, reason, last_reconciled_at}."""
    states: list[dict[str, object]] = [{
        "cluster": home_cluster_name(), "state": tenant.state, "reason": tenant.state_reason,
        "last_reconciled_at": tenant.last_reconciled_at}]
    rows = TenantCluster.objects.filter(tenant=tenant).select_related("cluster").order_by(
        "cluster__name")
    states += [{"cluster": row.cluster.name, "state": row.state, "reason": row.reason,
                "last_reconciled_at": row.last_reconciled_at} for row in rows]
    return states
