"""Celery tasks of the tenants domain: each takes ids, fetches, calls one service."""

from __future__ import annotations

import logging

from core.tasks import task
from kube.client import KubeError

from . import provisioning
from .keystone_sync import tenants_sync_from_keystone
from .models import Tenant

log = logging.getLogger(__name__)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def tenant_reconcile_task(tenant_id: int) -> None:
    """Reconcile one tenant's namespace on every cluster it may use (the other clusters' first:
    one that does not answer is only recorded, never retried here); on the home cluster's
    errors the tenant shows "failed" and the task retries with exponential backoff (the
    periodic sweep catches whatever is left)."""
    provisioning.tenant_clusters_reconcile(tenant_id=tenant_id)
    provisioning.tenant_reconcile(tenant_id=tenant_id)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def department_cohort_delete_task(department_id: int) -> None:
    """A removed department's Cohort goes (with Kueue)."""
    provisioning.department_cohort_delete(department_id=department_id)


@task(ignore_result=True)
def tenants_reconcile_all() -> int:
    """Periodic: every active tenant, so drift made by hand is put back."""
    ids = list(Tenant.objects.exclude(state__in=[Tenant.State.DELETING, Tenant.State.DELETED])
               .values_list("pk", flat=True))
    for tenant_id in ids:
        tenant_reconcile_task.delay(tenant_id)
    return len(ids)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=5, retry_backoff_max=300,
      max_retries=12, ignore_result=True)
def tenants_delete_due() -> int:
    """Periodic: delete the namespaces of tenants whose deletion grace has passed."""
    due = Tenant.objects.filter(state=Tenant.State.DELETING).values_list("pk", flat=True)
    return sum(provisioning.tenant_namespace_delete(tenant_id=pk) for pk in due)


@task(ignore_result=True)
def tenants_sync_keystone() -> dict[str, int]:
    """Periodic: record new Keystone projects as tenants; start deleting vanished ones."""
    return tenants_sync_from_keystone()
