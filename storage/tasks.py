"""Celery tasks of the storage domain: each takes a volume's id, fetches, calls one service.
Idempotent (the claim's name is the volume's; 409 is "already there"), retried with back-off
while the cluster does not answer."""

from __future__ import annotations

from core.tasks import task
from kube.client import KubeError

from .services import volume_claim_apply, volume_claim_delete


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
