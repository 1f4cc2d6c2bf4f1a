"""Celery tasks of the calendar: the beats that act on reservations and maintenance windows.
Each is idempotent (every step a conditional update of its own column)."""

from __future__ import annotations

import logging

from core.tasks import task

from .reservations import reservations_tick

log = logging.getLogger(__name__)


# --- reservations: the quota raised while one runs, borrowers warned, unused ones released ---


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def calendars_reservations_task() -> None:
    """Every minute: reservations_tick (calendars/reservations.py)."""
    result = reservations_tick()
    if result.acted:
        log.info("reservations: warned %s, applied %s, released %s, ended %s, quotas %s",
                 result.warned, result.applied, result.released, result.ended, result.quotas)
