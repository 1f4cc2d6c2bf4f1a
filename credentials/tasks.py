"""The secrets' beat task: the rows and the cluster's Secrets held to each other
(services.secrets_sweep: lost values marked and their owners told, orphaned Secrets deleted)."""

from __future__ import annotations

from core.tasks import task
from kube.client import KubeError

from .services import secrets_sweep


@task(ignore_result=True, autoretry_for=(KubeError,), retry_backoff=5, max_retries=2,
      soft_time_limit=240, time_limit=270)
def secrets_sweep_task() -> None:
    secrets_sweep()
