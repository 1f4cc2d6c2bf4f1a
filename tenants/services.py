"""Writes of the tenants domain: tenants, quotas, deletion. Each audited."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import Actor, audit_record
from catalogue.models import GpuType
from clusters.models import Cluster
from core.tasks import send_on_commit
from core.validation import FieldsInvalid, excerpt
from identity.client import Project
from kube.labels import namespace_name

from .figures import AdjustmentLine
from .hooks import TENANT_DELETING
from .models import (
    Department,
    DepartmentGpuCap,
    GpuQuota,
    Quota,
    QuotaAdjustment,
    StorageClassQuota,
    Tenant,
)
from .names import name_skeleton
from .selectors import adjustment_line as _line
from .transitions import ACTIVE, tenant_transition

QUOTA_FIELDS = ("gpus_total", "cpu", "memory_gb", "max_workloads", "max_runtime_minutes",
                "storage_gib", "volumes",
                "idle_threshold_percent", "idle_minutes", "idle_action", "idle_grace_minutes",
                "allow_over_capacity", "gpu_borrowing_limit", "gpu_lending_limit",
                "fair_share_weight")

log = logging.getLogger(__name__)


def _enqueue_reconcile(tenant_id: int) -> None:
    send_on_commit("tenants.tasks.tenant_reconcile_task", tenant_id)


def quota_snapshot(quota: Quota) -> dict[str, Any]:
    """A quota as plain data: what the audit trail and the API show."""
    data = {field: getattr(quota, field) for field in QUOTA_FIELDS}
    data["fair_share_weight"] = f"{Decimal(str(quota.fair_share_weight)).normalize():f}"
    data["gpus_by_type"] = quota.gpus_by_type()
    data["storage_by_class"] = quota.storage_by_class()
    return data


def quota_create_default(*, tenant: Tenant) -> Quota:
    quota = Quota.objects.create(
        tenant=tenant,
        gpus_total=settings.PORTAL_DEFAULT_QUOTA_GPUS_TOTAL,
        cpu=settings.PORTAL_DEFAULT_QUOTA_CPU,
        memory_gb=settings.PORTAL_DEFAULT_QUOTA_MEMORY_GB,
        max_workloads=settings.PORTAL_DEFAULT_QUOTA_WORKLOADS,
        storage_gib=settings.PORTAL_DEFAULT_QUOTA_STORAGE_GIB,
        volumes=settings.PORTAL_DEFAULT_QUOTA_VOLUMES,
        max_runtime_minutes=settings.PORTAL_DEFAULT_MAX_RUNTIME_MINUTES,
    )
    per_type = settings.PORTAL_DEFAULT_QUOTA_GPUS_PER_TYPE
    if per_type:
        GpuQuota.objects.bulk_create(
            GpuQuota(quota=quota, gpu_type=gpu_type, gpus=per_type)
            for gpu_type in GpuType.objects.filter(enabled=True)
        )
    return quota


class TenantNameConfusable(Exception):
    """A Keystone project whose name looks like another tenant's: no tenant is made for it."""

    def __init__(self, *, name: str, project_id: str, other: Tenant) -> None:
        super().__init__(
            f"The project {name!r} ({project_id}) has no tenant: its name looks like that of "
            f"{other.name!r} ({other.keystone_project_id}). Rename one of them in Keystone.")
        self.other = other


def tenant_name_lookalike(name: str, *, exclude_project_id: str) -> Tenant | None:
    """Another tenant whose name looks like `name` (tenants/names.py), if there is one."""
    skeleton = name_skeleton(name)
    others = Tenant.objects.exclude(keystone_project_id=exclude_project_id).exclude(
        state=Tenant.State.DELETED).only("pk", "name", "keystone_project_id")
    return next((other for other in others if name_skeleton(other.name) == skeleton), None)


def tenant_ensure(*, keystone_project_id: str, name: str, domain_id: str = "default") -> Tenant:
    """The tenant row of a Keystone project, created on first sight (with the default quota,
    and its namespace provisioned right after commit). A renamed project keeps its namespace
    (a namespace cannot be renamed); only the display name follows Keystone.

    A project whose name looks like another tenant's (`vision‐lab` beside `vision-lab`) gets no
    tenant: TenantNameConfusable. A tenant renamed in Keystone to such a name keeps its old
    name in the portal."""
    tenant = Tenant.objects.filter(keystone_project_id=keystone_project_id).first()
    if tenant is not None:
        if tenant.name != name and tenant_name_lookalike(
                name, exclude_project_id=keystone_project_id) is not None:
            log.warning("project %s was renamed in Keystone to a name that looks like another "
                        "tenant's; the portal keeps its old name %r", keystone_project_id,
                        tenant.name)
            name = tenant.name
        if tenant.name != name or tenant.domain_id != domain_id:
            tenant.name, tenant.domain_id = name, domain_id
            tenant.save(update_fields=["name", "domain_id", "updated_at"])
        return tenant
    other = tenant_name_lookalike(name, exclude_project_id=keystone_project_id)
    if other is not None:
        raise TenantNameConfusable(name=name, project_id=keystone_project_id, other=other)
    # The digest makes collisions between projects all but impossible; should two ids still
    # share a digest prefix, a longer digest settles it.
    for digest_length in (6, 10, 16, 32):
        namespace = namespace_name(project_name=name, project_id=keystone_project_id,
                                   prefix=settings.PORTAL_NAMESPACE_PREFIX,
                                   digest_length=digest_length)
        if Tenant.objects.filter(namespace=namespace).exists():
            continue
        try:
            with transaction.atomic():
                tenant = Tenant.objects.create(keystone_project_id=keystone_project_id,
                                               name=name, domain_id=domain_id,
                                               namespace=namespace)
                quota_create_default(tenant=tenant)
                audit_record(actor=None, action="tenant.create", tenant=tenant,
                             target=namespace, after={"name": name, "namespace": namespace})
        except IntegrityError:
            existing = Tenant.objects.filter(keystone_project_id=keystone_project_id).first()
            if existing is not None:  # a concurrent first sight created it
                return existing
            continue
        _enqueue_reconcile(tenant.pk)
        return tenant
    raise RuntimeError(f"no free namespace name for project {keystone_project_id}")


def quota_update(*, tenant: Tenant, acting_user: Actor, changes: dict[str, Any]) -> Quota:
    """Apply validated quota changes at once: in portal admission right away (same row), and
    in the namespace's ResourceQuota by the reconcile enqueued on commit. Lowering a quota
    below what is in use is allowed: it blocks new launches, never stops running work."""
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)  # serialise with admission
        quota = Quota.objects.select_for_update().get(tenant=tenant)
        before = quota_snapshot(quota)
        for field in QUOTA_FIELDS:
            if field in changes:
                setattr(quota, field, changes[field])
        quota.save()
        if "gpus_by_type" in changes:
            types = {t.slug: t for t in GpuType.objects.filter(slug__in=changes["gpus_by_type"])}
            for slug, gpus in changes["gpus_by_type"].items():
                GpuQuota.objects.update_or_create(quota=quota, gpu_type=types[slug],
                                                  defaults={"gpus": gpus})
        if "storage_by_class" in changes:
            wanted = changes["storage_by_class"]
            StorageClassQuota.objects.filter(quota=quota).exclude(
                storage_class__in=list(wanted)).delete()
            for name, limit in wanted.items():
                StorageClassQuota.objects.update_or_create(quota=quota, storage_class=name,
                                                           defaults=limit)
        after = quota_snapshot(quota)
        if after != before:
            audit_record(actor=acting_user, action="quota.update", tenant=tenant,
                         target=tenant.namespace, before=before, after=after)
            _enqueue_reconcile(tenant.pk)
    return quota


def _adjustments_now(tenant: Tenant, source: str) -> list[dict[str, Any]]:
    rows = QuotaAdjustment.objects.filter(quota__tenant=tenant, source=source) \
        .select_related("gpu_type")
    return sorted((line.as_data() for line in map(_line, rows)), key=_order)


def _order(data: dict[str, Any]) -> tuple[str, str, int, str]:
    return (data["ref"], data["gpu_type"] or "", data["gpus"], data["kind"])


def quota_adjustments_set(*, tenant: Tenant, source: str, adjustments: Sequence[AdjustmentLine],
                          reason: str, acting_user: Actor = None) -> bool:
    """Replace the tenant's quota adjustments of `source` (QuotaAdjustment.Source) by
    `adjustments` (each of that source; none: remove them): the one way any of them is
    written, each source writing only its own. At once in the portal's admission (it reads
    the rows); in the namespace's ResourceQuota and, where the cluster queues on Kueue, its
    ClusterQueue (nominal quotas, stopPolicy Hold) by the reconcile enqueued on commit.
    Returns whether anything changed; audited (`quota.adjust`, with `reason`) when it did.
    A writer may call it as often as it likes: the same rows again change nothing, and
    cost one read without a lock."""
    kinds = QuotaAdjustment.Kind
    for line in adjustments:
        if line.source != source:
            raise ValueError(f"an adjustment of {line.source} given as one of {source}")
        if line.kind == kinds.HOLD and (line.gpus or line.gpu_type):
            raise ValueError("a hold names no GPU type and no GPUs")
        if line.kind == kinds.DELTA and not line.gpus:
            raise ValueError("a delta adds or withholds some GPUs")
        if line.kind not in kinds.values:
            raise ValueError(f"unknown kind of adjustment: {line.kind}")
    if source not in QuotaAdjustment.Source.values:
        raise ValueError(f"unknown source of adjustments: {source}")
    wanted = sorted((line.as_data() for line in adjustments), key=_order)
    if _adjustments_now(tenant, source) == wanted:
        return False
    slugs = {line.gpu_type for line in adjustments if line.gpu_type}
    types = {t.slug: t for t in GpuType.objects.filter(slug__in=slugs)}
    if slugs - set(types):
        raise ValueError(f"unknown GPU type(s): {', '.join(sorted(slugs - set(types)))}")
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)  # serialise with admission
        quota = Quota.objects.select_for_update().get(tenant=tenant)
        before = _adjustments_now(tenant, source)
        if before == wanted:
            return False
        quota.adjustments.filter(source=source).delete()
        QuotaAdjustment.objects.bulk_create(
            QuotaAdjustment(quota=quota, source=source, ref=line.ref, kind=line.kind,
                            gpu_type=types.get(line.gpu_type or ""), gpus=line.gpus,
                            reason=line.reason, starts_at=line.starts_at,
                            ends_at=line.ends_at)
            for line in adjustments)
        audit_record(actor=acting_user, action="quota.adjust", tenant=tenant,
                     target=tenant.namespace, before={"source": source, "adjustments": before},
                     after={"source": source, "adjustments": wanted, "reason": reason})
        _enqueue_reconcile(tenant.pk)
    return True


def tenant_mark_deleting(*, tenant: Tenant, acting_user: Actor, reason: str) -> Tenant:
    """Start deleting a tenant: its workloads stop now; the namespace goes after the grace."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = {"state": tenant.state}
        delete_after = timezone.now() + dt.timedelta(
            minutes=settings.PORTAL_TENANT_DELETE_GRACE_MINUTES)
        if not tenant_transition(tenant=tenant, allowed_from=ACTIVE, to=Tenant.State.DELETING,
                                 reason=reason, delete_after=delete_after):
            return tenant  # deleting or deleted already
        stopped = sum(stop(tenant=tenant, user=acting_user,
                           reason=f"The tenant is being deleted: {reason}")
                      for stop in TENANT_DELETING)
        audit_record(actor=acting_user, action="tenant.delete", tenant=tenant,
                     target=tenant.namespace, before=before,
                     after={"state": tenant.state, "reason": reason,
                            "delete_after": delete_after.isoformat(),
                            "workloads_stopped": stopped})
    return tenant


class TenantClustersInvalid(FieldsInvalid):
    """Clusters named that are not registered (field `clusters`)."""


def tenant_clusters_set(*, tenant: Tenant, acting_user: Actor, names: Sequence[str]) -> Tenant:
    """Limit the tenant's workloads to these clusters (none: every enabled cluster); checked
    at each launch (workloads/validation.py). Audited."""
    wanted = sorted(set(names))
    found = list(Cluster.objects.filter(name__in=wanted))
    missing = sorted(set(wanted) - {cluster.name for cluster in found})
    if missing:
        raise TenantClustersInvalid({"clusters": [
            f"No cluster named {', '.join(excerpt(name) for name in missing[:5])}."]})
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = sorted(tenant.clusters.values_list("name", flat=True))
        tenant.clusters.set(found)
        if before != wanted:
            audit_record(actor=acting_user, action="tenant.clusters", tenant=tenant,
                         target=tenant.namespace, before={"clusters": before},
                         after={"clusters": wanted})
            # its namespace made on the clusters it may use now, removed from the others
            _enqueue_reconcile(tenant.pk)
    return tenant


def tenant_restore(*, tenant: Tenant, acting_user: Actor) -> Tenant:
    """Undo a pending deletion (the project came back, or the admin changed their mind)."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if not tenant_transition(tenant=tenant, allowed_from=(Tenant.State.DELETING,),
                                 to=Tenant.State.NEW, reason="", delete_after=None):
            return tenant
        audit_record(actor=acting_user, action="tenant.restore", tenant=tenant,
                     target=tenant.namespace, before={"state": "deleting"},
                     after={"state": tenant.state})
        _enqueue_reconcile(tenant.pk)
    return tenant


def tenant_root_templates_update(*, tenant: Tenant, acting_user: Actor, allow: bool) -> Tenant:
    """Let the tenant run templates that may run as root, or stop it. Its namespace's Pod
    Security level follows at the reconcile enqueued on commit ("baseline" where the site's is
    "restricted"): pods already running stay; a new root pod is refused under "restricted".
    Audited."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if tenant.allow_root_templates == allow:
            return tenant
        tenant.allow_root_templates = allow
        tenant.save(update_fields=["allow_root_templates", "updated_at"])
        audit_record(actor=acting_user, action="tenant.allow_root_templates", tenant=tenant,
                     target=tenant.namespace, before={"allow_root_templates": not allow},
                     after={"allow_root_templates": allow})
        _enqueue_reconcile(tenant.pk)
    return tenant


# --- the images a tenant may use ------------------------------------------------------------

def tenant_image_prefixes_update(*, tenant: Tenant, acting_user: Actor, prefixes: list[str]) -> Tenant:
    """Set the registries/prefixes a tenant's launches must use (validated, qualified entries
    such as `nvcr.io/nvidia`; empty: any image). Admission checks them from the next launch."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = list(tenant.image_prefixes or [])
        if prefixes != before:
            tenant.image_prefixes = list(prefixes)
            tenant.save(update_fields=["image_prefixes", "updated_at"])
            audit_record(actor=acting_user, action="tenant.image_prefixes", tenant=tenant,
                         target=tenant.namespace, before=before, after=list(prefixes))
    return tenant


# --- departments ----------------------------------------------------------------------------

DEPARTMENT_FIELDS = ("name", "description", "keystone_project_id", "gpu_cap")


def department_snapshot(department: Department) -> dict[str, Any]:
    return {**{field: getattr(department, field) for field in DEPARTMENT_FIELDS},
            "gpu_caps_by_type": department.gpu_caps_by_type()}


def _department_caps_set(department: Department, caps: dict[str, int]) -> None:
    """The whole set of per-type caps (a type left out has none)."""
    DepartmentGpuCap.objects.filter(department=department).exclude(
        gpu_type__slug__in=list(caps)).delete()
    types = {t.slug: t for t in GpuType.objects.filter(slug__in=list(caps))}
    for slug, gpus in caps.items():
        DepartmentGpuCap.objects.update_or_create(department=department, gpu_type=types[slug],
                                                  defaults={"gpus": gpus})


def _enqueue_department_reconcile(department: Department) -> None:
    """Its projects' queues again: with Kueue, their ClusterQueues name its Cohort, and the
    Cohort's limits follow its cap and their quotas (tenants/queueing.py)."""
    for tenant_id in department.tenants.exclude(state=Tenant.State.DELETED).values_list(
            "pk", flat=True):
        _enqueue_reconcile(tenant_id)


def department_create(*, acting_user: Actor, fields: dict[str, Any]) -> Department:
    """A department, from validated fields (tenants/api/serializers.py, tenants/forms.py;
    `gpu_caps_by_type`: {GPU type slug: GPUs}). Audited."""
    with transaction.atomic():
        department = Department.objects.create(
            **{field: fields[field] for field in DEPARTMENT_FIELDS if field in fields})
        _department_caps_set(department, fields.get("gpu_caps_by_type") or {})
        audit_record(actor=acting_user, action="department.create", target=department.name,
                     after=department_snapshot(department))
    return department


def department_update(*, department: Department, acting_user: Actor,
                      changes: dict[str, Any]) -> Department:
    """Validated changes of a department's fields (`gpu_caps_by_type`: the whole set of
    per-type caps). A new cap counts from the next launch, and its projects' queues follow it;
    lowering it below what they hold stops nothing. Audited, before → after."""
    with transaction.atomic():
        department = Department.objects.select_for_update().get(pk=department.pk)
        before = department_snapshot(department)
        for field in DEPARTMENT_FIELDS:
            if field in changes:
                setattr(department, field, changes[field])
        if "gpu_caps_by_type" in changes:
            _department_caps_set(department, changes["gpu_caps_by_type"])
        after = department_snapshot(department)
        if after != before:
            department.save()
            audit_record(actor=acting_user, action="department.update", target=department.name,
                         before=before, after=after)
            if (before["gpu_cap"], before["gpu_caps_by_type"]) != \
                    (after["gpu_cap"], after["gpu_caps_by_type"]):
                _enqueue_department_reconcile(department)
    return department


def department_delete(*, department: Department, acting_user: Actor) -> None:
    """The department goes; its projects stay, in no department (with Kueue their queues go
    back to the site's cohort, and its Cohort is removed). Audited (with the projects it
    held)."""
    with transaction.atomic():
        # its projects' rows before its own, as a launch takes them (the project's, then the
        # department's: workloads.services): taking its row first, its removal (which writes
        # theirs) and a launch could each wait on the other
        list(Tenant.objects.select_for_update().filter(department=department).order_by("pk")
             .values_list("pk", flat=True))
        department = Department.objects.select_for_update().get(pk=department.pk)
        before = {**department_snapshot(department),
                  "tenants": sorted(department.tenants.values_list("name", flat=True))}
        members = list(department.tenants.exclude(state=Tenant.State.DELETED)
                       .values_list("pk", flat=True))
        department_id = department.pk
        department.delete()
        audit_record(actor=acting_user, action="department.delete", target=before["name"],
                     before=before)
        for tenant_id in members:
            _enqueue_reconcile(tenant_id)
        send_on_commit("tenants.tasks.department_cohort_delete_task", department_id)


def tenant_department_set(*, tenant: Tenant, acting_user: Actor,
                          department: Department | None) -> Tenant:
    """Put a project in a department (None: in none): its launches count against the new
    department's cap from the next one; with Kueue its queue moves to that department's
    Cohort, and both departments' Cohorts are reckoned again. Audited."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        previous = tenant.department
        before = previous.name if previous is not None else None
        after = department.name if department is not None else None
        if tenant.department_id != (department.pk if department is not None else None):
            tenant.department = department
            tenant.save(update_fields=["department", "updated_at"])
            audit_record(actor=acting_user, action="tenant.department", tenant=tenant,
                         target=tenant.namespace, before={"department": before},
                         after={"department": after})
            _enqueue_reconcile(tenant.pk)
            for moved in (previous, department):
                if moved is not None:
                    _enqueue_department_reconcile(moved)
    return tenant


def tenants_ensure_for_projects(*, projects: list[Project]) -> None:
    """Every Keystone project seen gets its tenant: the entry of identity's PROJECTS_SEEN
    hook (login, an API caller's token), registered in apps.py."""
    for project in projects:
        try:
            tenant_ensure(keystone_project_id=project.id, name=project.name,
                          domain_id=project.domain_id)
        except TenantNameConfusable as exc:
            log.warning("%s", exc)  # the project is left without a tenant; the rest go on
