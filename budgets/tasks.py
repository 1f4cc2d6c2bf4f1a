"""Celery tasks of the budgets domain: every budget's check each minute (beat), and one
budget's check after an admin changed it. Idempotent: a check run twice, or two at once,
notifies, holds and stops once (budgets/services.py)."""

from __future__ import annotations

import logging

from core.tasks import task

from .services import budget_check, budgets_check_all

log = logging.getLogger(__name__)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def budgets_check_task() -> None:
    results = budgets_check_all()
    acted = {pk: r for pk, r in results.items() if r.notified or r.held is not None or r.stopped}
    if acted:
        log.info("budgets checked: %s", acted)


@task(ignore_result=True, soft_time_limit=50, time_limit=60)
def budget_check_task(budget_id: int) -> None:
    budget_check(budget_id=budget_id)
