"""Celery tasks of billing: the beat's close of the month that ended (billing/services.py
months_close_due). Idempotent: a month is closed once."""

from __future__ import annotations

import logging

from core.tasks import task

from .services import months_close_due

log = logging.getLogger(__name__)


@task(ignore_result=True, soft_time_limit=240, time_limit=300)
def months_close_task() -> None:
    closed = months_close_due()
    if closed is not None:
        log.info("month closed: %s", f"{closed.month:%Y-%m}")
