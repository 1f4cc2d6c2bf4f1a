"""Waiting in tests: `eventually` polls a check until it holds, within a loose bound.

The one way tests wait for something that happens in another process or thread (kubesim's
controllers, a Celery worker, a watch). The bound is generous on purpose: it only keeps a broken
test from hanging, it is not what the test checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.1,
               message: str | Callable[[], str] = "the condition did not hold",
               ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """Call `check` until it returns something truthy without raising, and return that value.

    An AssertionError raised by `check` (and any exception in `ignoring`, e.g. ApiException
    for an object that is not there yet) means "not yet". After `timeout` seconds the test
    fails with `message` (a callable is asked then, so that it can describe the state at that
    moment) and the last value or error seen; the last error is chained as the cause.
    """
    deadline = time.monotonic() + timeout
    while True:
        error: BaseException | None = None
        try:
            last: Any = check()
        except (AssertionError, *ignoring) as exc:
            error, last = exc, exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"{text} (not within {timeout:g} s; last: {last!r})") from error
        time.sleep(interval)
