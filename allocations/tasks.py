"""Celery tasks of the allocations domain: the beat's notices of allocations ending and ended.
Idempotent: each end date is told once (allocations/services.py)."""

from __future__ import annotations

import logging

from core.tasks import task

from .services import allocations_notify, requests_end

log = logging.getLogger(__name__)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def allocations_notify_task() -> None:
    result = allocations_notify()
    if result.ending or result.ended:
        log.info("allocations told: ending %s, ended %s", result.ending, result.ended)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def requests_end_task() -> None:
    ended = requests_end()
    if ended:
        log.info("temporary grants ended: requests %s", ended)
