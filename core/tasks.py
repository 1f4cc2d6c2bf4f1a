"""Handing work to the Celery workers from inside a request's transaction."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def send_on_commit(task: Any, *args: Any) -> None:
    """Send `task` once the current transaction commits.

    The committed row is the request: when the broker cannot take the message (Redis
    restarting), the request still succeeds and a periodic sweep hands the work out later
    (`workloads_requeue_stale` for launches and stops, `tenants_reconcile_all` for tenants).
    Failing here would answer an error for work already accepted, and a client would retry it.
    """
    from django.db import transaction

    def send() -> None:
        try:
            task.delay(*args)
        except Exception:  # noqa: BLE001 - kombu's OperationalError and whatever a broker raises
            log.warning("could not enqueue %s%r (broker unavailable); its periodic sweep will",
                        task.name, args, exc_info=True)

    transaction.on_commit(send)
