"""Celery tasks of the storage domain: each takes a volume's or a dataset's id, fetches, calls
one service. Idempotent (the claim's name is the volume's or the dataset's; 409 is "already
there", a 404 on delete "already gone"), retried with back-off while the cluster does not
answer."""

from __future__ import annotations

from core.tasks import task
from kube.client import KubeError

from .services import (
    dataset_claims_delete,
    tenant_dataset_claims_delete,
    volume_claim_apply,
    volume_claim_delete,
)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def volume_claim_apply_task(volume_id: int) -> str:
    """Make the volume's claim, or grow it to the volume's size."""
    return volume_claim_apply(volume_id=volume_id)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def volume_claim_delete_task(volume_id: int) -> bool:
    """Delete a deleted volume's claim, then its row."""
    return volume_claim_delete(volume_id=volume_id)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def dataset_claims_delete_task(dataset_id: int, namespaces: list[str] | None) -> int:
    """Delete a dataset's claims and volumes in the namespaces it was closed to (None: every
    one; it was deleted)."""
    return dataset_claims_delete(dataset_id=dataset_id, namespaces=namespaces)


@task(acks_late=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=300,
      retry_jitter=True, max_retries=12, ignore_result=True)
def tenant_dataset_claims_delete_task(namespace: str, project_id: str) -> int:
    """Delete the datasets' claims and volumes of a tenant being deleted."""
    return tenant_dataset_claims_delete(namespace=namespace, project_id=project_id)
