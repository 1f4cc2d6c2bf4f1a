"""Celery tasks, typed (`task`), and handing work to the workers from inside a request's
transaction (`send_on_commit`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Task(Protocol[P, R_co]):
    """What a Celery task offers the code that calls or sends it (Celery ships no types):
    called, it runs here; `delay` sends it with the same arguments."""

    name: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...


def task(**options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
    """`celery.shared_task(**options)` with the decorated function's signature kept for the
    type checker (unbound tasks only: a task that needs `self` is `shared_task(bind=True)`)."""
    from celery import shared_task

    assert not options.get("bind"), "a bound task's signature is not the function's"
    return cast(Callable[[Callable[P, R]], Task[P, R]], shared_task(**options))


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
