"""Celery tasks of the calendar. Each takes an id (or nothing), fetches and calls one function;
each is idempotent (the steps claim their columns, notify() tells each user once per event)."""

from __future__ import annotations

import logging

from core.tasks import task

from .maintenance import window_advance, window_announce, windows_advance
from .reservations import reservations_tick

log = logging.getLogger(__name__)


# --- maintenance windows (calendars/maintenance.py) ------------------------------------------

@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def maintenance_announce_task(window_id: int) -> None:
    """Sent when a window is announced: the owners of the workloads it would reach are told."""
    told = window_announce(window_id=window_id)
    if told:
        log.info("maintenance #%s announced to %s owners", window_id, told)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def maintenance_window_task(window_id: int) -> None:
    """One window taken as far as the clock says (sent when one is cancelled: called off, or
    ended at once)."""
    window_advance(window_id=window_id)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def maintenance_windows_task() -> None:
    """The beat, every minute: notices 24 h and 1 h ahead, the start (cordon, drain), the end
    (uncordon), the cancelled ones called off."""
    windows_advance()


# --- reservations (calendars/reservations.py): the quota raised while one runs, borrowers
# warned an hour ahead, unused ones released after the grace, and at the end the workloads
# beyond the lowered quota told, then put back in line or stopped ------------------------------

@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def reservations_task() -> None:
    """The beat, every minute (and sent when a reservation is cancelled, so that its end is
    acted on at once): reservations_tick."""
    result = reservations_tick()
    if result.acted:
        log.info("reservations: warned %s, applied %s, released %s, ended %s, quotas %s; "
                 "told of the end %s, beyond the quota after it %s, put back in line %s, "
                 "stopped %s", result.warned, result.applied, result.released, result.ended,
                 result.quotas, result.end_warned, result.excess_told, result.requeued,
                 result.stopped)
