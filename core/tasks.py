"""Celery tasks, typed (`task`), and handing work to the workers from inside a request's
transaction (`send_on_commit`), by the task's name.

Work is queued by name, as Zulip's `queue_event_on_commit(queue_name, …)` does: a service says
which task it wants ("workloads.tasks.workload_create_task", the name Celery registers a task
under and the beat schedule uses), and never imports the module that defines it. The workers'
modules import the services they call; were the services to import the workers back, the two
would be a cycle (hidden inside functions, as it was). tests/architecture checks that every
name sent is a registered task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from celery import current_app, shared_task
from django.db import transaction

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

    def apply_async(self, args: tuple[Any, ...], *, countdown: float) -> Any: ...


def task(**options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
    """`celery.shared_task(**options)` with the decorated function's signature kept for the
    type checker (unbound tasks only: a task that needs `self` is a `bound_task`)."""
    assert not options.get("bind"), "a bound task's signature is not the function's"
    return cast(Callable[[Callable[P, R]], Task[P, R]], shared_task(**options))


class TryRequest(Protocol):
    """The message a bound task runs for, as far as its body reads it."""

    retries: int  # how many times it was tried before this one


class BoundTask(Protocol):
    """What a bound task's body reads of itself (its first argument): the tries so far, the
    limit it was declared with (None: no limit) and `retry`, which returns the exception to
    raise."""

    request: TryRequest
    max_retries: int | None

    def retry(self, *, exc: BaseException | None = None,
              countdown: float | None = None) -> Exception: ...


def bound_task(**options: Any) -> Callable[[Callable[Concatenate[BoundTask, P], R]], Task[P, R]]:
    """`celery.shared_task(bind=True, **options)`, typed as `task` is: the task is called and
    sent with the function's arguments after the first, which is the task itself."""
    return cast(Callable[[Callable[Concatenate[BoundTask, P], R]], Task[P, R]],
                shared_task(bind=True, **options))


class UnknownTask(LookupError):
    """No task is registered under the name a writer sent (a typo, or a task renamed)."""


def registered_task(name: str) -> Task[..., Any]:
    """The task Celery registered under `name`. The registry is filled by the app's
    autodiscovery (every installed app's `tasks` module), which a web process runs on the first
    name it does not know yet."""
    tasks = current_app.tasks
    if name not in tasks:
        current_app.loader.import_default_modules()
    try:
        return cast(Task[..., Any], tasks[name])
    except KeyError:
        raise UnknownTask(f"no Celery task is registered as {name!r}") from None


def send_on_commit(name: str, *args: Any) -> None:
    """Send the task registered as `name` once the current transaction commits.

    The name is resolved now, so that a name no task carries fails in the writer (and in its
    tests), not after the commit. The committed row is the request: when the broker cannot
    take the message (Redis restarting), the request still succeeds and a periodic sweep hands
    the work out later (`workloads_requeue_stale` for launches and stops,
    `tenants_reconcile_all` for tenants). Failing here would answer an error for work already
    accepted, and a client would retry it.
    """
    queued = registered_task(name)

    def send() -> None:
        try:
            queued.delay(*args)
        except Exception:  # noqa: BLE001 - kombu's OperationalError and whatever a broker raises
            log.warning("could not enqueue %s%r (broker unavailable); its periodic sweep will",
                        name, args, exc_info=True)

    transaction.on_commit(send)
