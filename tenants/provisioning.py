"""Reconcile each tenant's namespace to its desired state (tenants/manifests.py).

Idempotent: an object already as desired costs one GET and no write; a missing object is
created, a drifted one is put back (and the tenant shows "drifted" until the next clean run).
Cluster failures mark the tenant "failed: <reason>" and propagate for the task to retry.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from catalogue.models import GpuType
from catalogue.sharing import DRA, device_class_quota, dra_type_class, dra_type_class_selector
from clusters.models import Cluster
from clusters.selectors import dispatch_workers
from kube.client import Conflict, Kube, KubeError
from kube.dra import dra_refusal
from kube.kueue import queueing_on
from kube.labels import MANAGED_BY_SELECTOR
from tenants.kueue import department_cohort
from tenants.manifests import PROXY_CPU_MILLIS, PROXY_MEMORY_MIB
from tenants.queueing import cluster_queueing_objects, tenant_queue_objects

from .hooks import CLAIM_ALLOWANCES
from .manifests import (
    PRIVATE_RANGES,
    RETIRED_OBJECTS,
    DeviceClassSpec,
    EgressSpec,
    NamespaceSpec,
    egress_destination,
    make_device_class,
    tenant_objects,
)
from .models import Quota, Tenant, TenantCluster
from .selectors import quota_figures, tenant_pod_security
from .transitions import ACTIVE, tenant_cluster_record, tenant_transition

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ReconcileResult:
    created: list[str] = dataclasses.field(default_factory=list)
    repaired: list[str] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)  # retired objects deleted

    @property
    def changed(self) -> bool:
        return bool(self.created or self.repaired or self.removed)


def egress_spec() -> EgressSpec:
    """The site's egress of tenant pods, from the settings (tenants/checks.py checks them)."""
    port = settings.PORTAL_WORKLOAD_EGRESS_PORTAL_PORT
    return EgressSpec(
        dns_namespace=settings.PORTAL_WORKLOAD_EGRESS_DNS_NAMESPACE,
        dns_pod_labels=tuple(sorted(settings.PORTAL_WORKLOAD_EGRESS_DNS_POD_LABELS.items())),
        portal_namespace=settings.PORTAL_WORKLOAD_EGRESS_PORTAL_NAMESPACE,
        portal_pod_labels=tuple(sorted(
            settings.PORTAL_WORKLOAD_EGRESS_PORTAL_POD_LABELS.items())),
        portal_port=int(port) if str(port).isdigit() else port,
        destinations=tuple(egress_destination(entry)
                           for entry in settings.PORTAL_WORKLOAD_EGRESS_CIDRS),
        internet=settings.PORTAL_WORKLOAD_EGRESS_INTERNET,
        internet_except=tuple(settings.PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT) or PRIVATE_RANGES,
    )


def namespace_spec(tenant: Tenant, quota: Quota, *, queued: bool = False) -> NamespaceSpec:
    """The ResourceQuota holds the figures in force (tenants.selectors.quota_figures): a
    running reservation raises them."""
    figures = quota_figures(tenant, quota=quota).in_force
    allowances = [entry(tenant=tenant) for entry in CLAIM_ALLOWANCES]
    by_resource: dict[str, int] = {}
    for gpu_type in GpuType.objects.filter(slug__in=figures.gpus_by_type):
        resource = (device_class_quota(dra_type_class(gpu_type.slug))
                    if gpu_type.sharing == DRA else gpu_type.resource_name)
        by_resource[resource] = by_resource.get(resource, 0) + figures.gpus_by_type[gpu_type.slug]
    return NamespaceSpec(
        namespace=tenant.namespace,
        project_id=tenant.keystone_project_id,
        project_name=tenant.name,
        gpus_total=figures.gpus_total,
        gpus_by_resource=by_resource,
        cpu=figures.cpu,
        memory_gb=figures.memory_gb,
        max_workloads=quota.max_workloads,
        storage_gib=figures.storage_gib + sum(gib for _, gib in allowances),
        volumes=figures.volumes + sum(claims for claims, _ in allowances),
        storage_by_class=tuple((name, limit["storage_gib"], limit["volumes"])
                               for name, limit in sorted(quota.storage_by_class().items())),
        pod_security=(tenant_pod_security(tenant), settings.PORTAL_POD_SECURITY_WARN,
                      settings.PORTAL_POD_SECURITY_AUDIT),
        project_group_format=settings.PORTAL_RBAC_PROJECT_GROUP_FORMAT,
        role_group_format=settings.PORTAL_RBAC_ROLE_GROUP_FORMAT,
        default_cpu=settings.PORTAL_DEFAULT_CONTAINER_CPU,
        default_memory=settings.PORTAL_DEFAULT_CONTAINER_MEMORY,
        default_cpu_request=settings.PORTAL_DEFAULT_CONTAINER_CPU_REQUEST,
        default_memory_request=settings.PORTAL_DEFAULT_CONTAINER_MEMORY_REQUEST,
        sidecar_cpu_millis=PROXY_CPU_MILLIS,
        sidecar_memory_mib=PROXY_MEMORY_MIB,
        egress=egress_spec(),
        queued=queued,
    )


# Fields that must equal the desired value exactly: an extra key added by hand is drift too.
EXACT = {("ResourceQuota", "spec"), ("Cohort", "spec"), ("DeviceClass", "spec"), ("LimitRange", "spec"), ("RoleBinding", "subjects"),
         ("RoleBinding", "roleRef"), ("NetworkPolicy", "spec")}


def _contains(desired: Any, live: Any) -> bool:
    """Whether `live` holds everything `desired` says (the server may add defaults)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            key in live and _contains(value, live[key]) for key, value in desired.items())
    if isinstance(desired, list):
        return (isinstance(live, list) and len(desired) == len(live)
                and all(_contains(d, v) for d, v in zip(desired, live, strict=True)))
    return bool(desired == live)


def _exact(desired: Any, live: Any) -> bool:
    """Same keys at every dict level (server defaults below desired leaves are allowed)."""
    if isinstance(desired, dict):
        return (isinstance(live, dict) and set(desired) == set(live)
                and all(_exact(v, live[k]) for k, v in desired.items()))
    return _contains(desired, live)


def in_desired_state(desired: dict[str, Any], live: dict[str, Any]) -> bool:
    kind = desired["kind"]
    meta = desired["metadata"]
    live_meta = live.get("metadata", {})
    for part in ("labels", "annotations"):
        if not _contains(meta.get(part, {}), live_meta.get(part) or {}):
            return False
    for field, value in desired.items():
        if field in ("apiVersion", "kind", "metadata"):
            continue
        if field not in live:
            return False
        check = _exact if (kind, field) in EXACT else _contains
        if not check(value, live[field]):
            return False
    return True


def _ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") and obj["kind"] != "Namespace" else ""
    return f"{obj['kind']} {where}{meta['name']}"


CONFLICT_TRIES = 3


def _ensure(kube: Kube, desired: dict[str, Any], result: ReconcileResult) -> None:
    """Create, leave or repair one object. Two reconciles of a tenant may run at once (a
    quota save and the periodic sweep): a 409 means the other one got there first, so read
    again and decide again rather than fail the tenant."""
    for attempt in range(CONFLICT_TRIES):
        try:
            _ensure_once(kube, desired, result)
            return
        except Conflict:
            if attempt == CONFLICT_TRIES - 1:
                raise


def _ensure_once(kube: Kube, desired: dict[str, Any], result: ReconcileResult) -> None:
    meta = desired["metadata"]
    namespace = meta.get("namespace") if desired["kind"] != "Namespace" else None
    live = kube.get(desired["kind"], meta["name"], namespace)
    if live is None:
        kube.create(desired)
        result.created.append(_ref(desired))
        return
    if in_desired_state(desired, live):
        result.unchanged.append(_ref(desired))
        return
    if desired["kind"] == "Namespace":
        # a namespace is only ours in its labels/annotations: patch those, keep the rest
        kube.patch("Namespace", meta["name"], {"metadata": {
            "labels": meta["labels"], "annotations": meta.get("annotations", {})}})
    elif desired["kind"] == "RoleBinding" and live.get("roleRef") != desired["roleRef"]:
        # a RoleBinding's roleRef cannot change (the API server answers 422): make it anew
        kube.delete("RoleBinding", meta["name"], namespace)
        kube.create(desired)
    else:
        body = {**desired, "metadata": {**meta,
                                        "resourceVersion": live["metadata"]["resourceVersion"]}}
        kube.replace(body)
    result.repaired.append(_ref(desired))


def device_class_specs() -> list[DeviceClassSpec]:
    """A DeviceClass per DRA type of the catalogue, enabled or not (a disabled type's running
    workloads keep theirs: a pod made again still names it)."""
    return [DeviceClassSpec(name=dra_type_class(t.slug), slug=t.slug,
                            selector=dra_type_class_selector(device_class=t.device_class,
                                                             product=t.product,
                                                             memory_gb=t.memory_gb,
                                                             profile=t.dra_profile))
            for t in GpuType.objects.filter(sharing=DRA).order_by("slug")]


def _reconcile_device_classes(kube: Kube, result: ReconcileResult) -> None:
    """Where the cluster serves resource.k8s.io/v1: each DRA type's own DeviceClass, as the
    catalogue says it (made, put back, changed with the type), and the portal's classes of
    types that are no longer DRA types removed. Cluster-wide, like Kueue's flavors: every
    tenant's reconcile on the cluster brings them to the catalogue's state."""
    if dra_refusal(kube) is not None:
        return
    desired = [make_device_class(spec) for spec in device_class_specs()]
    for obj in desired:
        _ensure(kube, obj, result)
    wanted = {obj["metadata"]["name"] for obj in desired}
    for live in kube.list("DeviceClass", label_selector=MANAGED_BY_SELECTOR)["items"]:
        name = live["metadata"]["name"]
        if name not in wanted and kube.delete("DeviceClass", name):
            result.removed.append(f"DeviceClass {name}")


def _reconcile_objects(tenant: Tenant, quota: Quota, kube: Kube, result: ReconcileResult
                       ) -> None:
    """Every object of the tenant's namespace on one cluster brought to its desired state,
    and the retired ones removed; raises KubeError (what was done is in `result`)."""
    queued = queueing_on(kube)
    desired_objects = tenant_objects(namespace_spec(tenant, quota, queued=queued))
    if queued:
        # the flavors and priority classes every queue needs, then the tenant's queues
        desired_objects += cluster_queueing_objects() + tenant_queue_objects(
            tenant, quota, cluster=kube.cluster)
    for desired in desired_objects:
        _ensure(kube, desired, result)
    _reconcile_device_classes(kube, result)
    for kind, name in RETIRED_OBJECTS:
        # an upgrade, not drift: the tenant stays provisioned
        if kube.delete(kind, name, tenant.namespace):
            result.removed.append(f"{kind} {tenant.namespace}/{name}")


def tenant_reconcile(*, tenant_id: int, kube: Kube | None = None) -> ReconcileResult:
    """Bring one tenant's namespace to its desired state; record what changed. On the home
    cluster (`kube` None, or the home cluster's client) the tenant's own state says how it
    went; on another (`kube` of that cluster) its row of that cluster does
    (tenant_reconcile_on)."""
    if kube is not None and kube.cluster is not None:
        return tenant_reconcile_on(tenant_id=tenant_id, cluster=kube.cluster, kube=kube)
    tenant = Tenant.objects.get(pk=tenant_id)
    if not tenant.is_active:
        return ReconcileResult()
    return _reconcile_recorded(
        tenant, kube or Kube(), first_time=tenant.state in (Tenant.State.NEW, Tenant.State.FAILED),
        record=lambda state, reason: _set_state(tenant, state, reason))


def tenant_reconcile_on(*, tenant_id: int, cluster: str, kube: Kube | None = None
                        ) -> ReconcileResult:
    """The tenant's namespace on a cluster other than the home one, as on the home cluster
    (the same objects: namespace, RBAC, quotas, NetworkPolicy, Kueue's queues where it runs
    Kueue); how it went is the tenant's row of that cluster (TenantCluster). Raises KubeError
    as tenant_reconcile does."""
    tenant = Tenant.objects.get(pk=tenant_id)
    found = Cluster.objects.filter(name=cluster, home=False).first()
    if not tenant.is_active or found is None:
        return ReconcileResult()
    row, _ = TenantCluster.objects.get_or_create(tenant=tenant, cluster=found)
    return _reconcile_recorded(
        tenant, kube or Kube(cluster=cluster),
        first_time=row.state in (TenantCluster.State.NEW, TenantCluster.State.FAILED),
        record=lambda state, reason: tenant_cluster_record(row=row, state=state,
                                                             reason=reason), cluster=cluster)


def _reconcile_recorded(tenant: Tenant, kube: Kube, *, first_time: bool,
                        record: Callable[[str, str], None], cluster: str | None = None
                        ) -> ReconcileResult:
    """One cluster's reconcile, its outcome recorded (`record(state, reason)`: the tenant's
    state, or its row of the cluster) and audited; a repair after the first time is drift."""
    result = ReconcileResult()
    try:
        _reconcile_objects(tenant, Quota.objects.get(tenant=tenant), kube, result)
    except KubeError as exc:
        record(Tenant.State.FAILED, f"{type(exc).__name__}: {exc}")
        if result.changed:
            _audit(tenant, result, cluster=cluster)
        raise
    drifted = bool(result.repaired) and not first_time
    record(Tenant.State.DRIFTED if drifted else Tenant.State.PROVISIONED,
           "repaired: " + ", ".join(result.repaired) if drifted else "")
    if result.changed:
        _audit(tenant, result, cluster=cluster)
    return result


def tenant_clusters_reconcile(*, tenant_id: int) -> dict[str, str]:
    """The tenant's namespace on every cluster other than the home one that it may use
    (enabled; those it is limited to, else every one), and removed from each enabled cluster
    taken off its list. A cluster that does not answer is passed over (its row says so) and
    done by a later sweep once its probe sees it again. Never raises for a cluster: returns
    per cluster name what happened ("provisioned", "drifted", "removed", "unreachable",
    "failed: …")."""
    tenant = Tenant.objects.get(pk=tenant_id)
    if not tenant.is_active:
        return {}
    allowed = set(tenant.clusters.values_list("name", flat=True))
    enabled = list(Cluster.objects.filter(enabled=True, home=False))
    done: dict[str, str] = {}
    for cluster in enabled:
        if allowed and cluster.name not in allowed:
            if TenantCluster.objects.filter(tenant=tenant, cluster=cluster).exists():
                done[cluster.name] = _namespace_remove_on(tenant, cluster)
            continue
        if cluster.state != Cluster.State.READY:
            row, _ = TenantCluster.objects.get_or_create(tenant=tenant, cluster=cluster)
            if row.state != TenantCluster.State.FAILED or not row.reason:
                tenant_cluster_record(
                    row=row, state=TenantCluster.State.FAILED,
                    reason=f"the cluster does not answer ({cluster.reason or 'no reason given'});"
                           " reconciled when it does")
            done[cluster.name] = "unreachable"
            continue
        try:
            result = tenant_reconcile_on(tenant_id=tenant.pk, cluster=cluster.name)
        except KubeError as exc:
            done[cluster.name] = f"failed: {exc}"
            continue
        done[cluster.name] = "drifted" if result.repaired else "provisioned"
    return done


def _namespace_remove_on(tenant: Tenant, cluster: Cluster) -> str:
    """The tenant's namespace (and its ClusterQueue) deleted on a cluster taken off its list;
    its row goes once the cluster has taken the deletion."""
    row = TenantCluster.objects.get(tenant=tenant, cluster=cluster)
    tenant_cluster_record(row=row, state=TenantCluster.State.REMOVING,
                          reason="the project may no longer use this cluster")
    kube = Kube(cluster=cluster.name)
    try:
        existed = kube.delete("Namespace", tenant.namespace, propagation="Foreground")
        if queueing_on(kube):
            kube.delete("ClusterQueue", tenant.namespace)
    except KubeError as exc:
        tenant_cluster_record(row=row, state=TenantCluster.State.REMOVING,
                              reason=f"the namespace is removed once the cluster answers ({exc})")
        return f"failed: {exc}"
    with transaction.atomic():
        row.delete()
        audit_record(actor=None, action="namespace.delete", tenant=tenant,
                     target=f"{cluster.name}/{tenant.namespace}",
                     before={"cluster": cluster.name},
                     after={"namespace_existed": existed, "why": "off the project's clusters"})
    return "removed"


def _set_state(tenant: Tenant, state: str, reason: str) -> None:
    """How the reconcile found the namespace; only while the tenant is still one to reconcile:
    one marked deleting while the reconcile ran stays deleting, for its namespace to go."""
    if not tenant_transition(tenant=tenant, allowed_from=ACTIVE, to=state, reason=reason,
                             last_reconciled_at=timezone.now()):
        log.info("tenant %s: not written %s: its state changed while its reconcile ran",
                 tenant.pk, state)


def _audit(tenant: Tenant, result: ReconcileResult, *, cluster: str | None = None) -> None:
    with transaction.atomic():
        audit_record(actor=None, action="namespace.reconcile", tenant=tenant,
                     target=f"{cluster}/{tenant.namespace}" if cluster else tenant.namespace,
                     before=None,
                     after={"created": result.created, "repaired": result.repaired,
                            **({"removed": result.removed} if result.removed else {})})


def tenant_namespace_delete(*, tenant_id: int, kube: Kube | None = None) -> bool:
    """Delete a tenant's namespace once its grace period has passed; True when deleted now."""
    tenant = Tenant.objects.get(pk=tenant_id)
    if tenant.state != Tenant.State.DELETING or tenant.delete_after is None:
        return False
    if tenant.delete_after > timezone.now():
        return False
    kube = kube or Kube()
    existed = kube.delete("Namespace", tenant.namespace, propagation="Foreground")
    if queueing_on(kube):
        kube.delete("ClusterQueue", tenant.namespace)  # cluster-wide: not in the namespace
        if kube.cluster is None:  # the manager: its queues dispatching to each worker too
            for worker in dispatch_workers():
                kube.delete("ClusterQueue", f"{tenant.namespace}-{worker}")
    for row in TenantCluster.objects.filter(tenant=tenant).select_related("cluster"):
        # on every other cluster too (one that does not answer keeps its row: the next
        # sweep tries again, the tenant's own deletion is not held up by it)
        _namespace_remove_on(tenant, row.cluster)
    with transaction.atomic():
        if not tenant_transition(tenant=tenant, allowed_from=(Tenant.State.DELETING,),
                                 to=Tenant.State.DELETED):
            # restored while its namespace was being deleted: the periodic reconcile
            # (tenants_reconcile_all) provisions it again once the namespace is gone
            log.warning("tenant %s was restored while its namespace was deleted", tenant.pk)
            tenant.refresh_from_db(fields=["state"])
        audit_record(actor=None, action="namespace.delete", tenant=tenant,
                     target=tenant.namespace, before={"state": "deleting"},
                     after={"state": tenant.state, "namespace_existed": existed})
    return True


def department_cohort_delete(*, department_id: int, kube: Kube | None = None) -> bool:
    """Remove a removed department's Cohort where launches queue on Kueue (its projects'
    queues are back in the site's cohort by their own reconcile); True when it was there."""
    kube = kube or Kube()
    if not queueing_on(kube):
        return False
    return bool(kube.delete("Cohort", department_cohort(department_id)))
