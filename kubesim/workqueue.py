"""A deduplicating work queue with delayed adds: how every simulated controller is driven.

Store listeners `add` keys (cheap, synchronous); one asyncio task per queue pops keys and
calls the controller's reconcile function. A key queued several times before it is processed
is processed once, which is what keeps a burst of pod events from costing a burst of work.
Timers (`add_after`) use the loop's scheduler, so an idle cluster burns no CPU.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Any

from kubesim.errors import ApiError

log = logging.getLogger("kubesim.cluster")

_MAX_BACKOFF = 30.0


def coalesce_delay(size: int) -> float:
    """How long an aggregate controller (one key per ReplicaSet, Service, namespace) lets
    events about its `size` members gather before it reconciles: milliseconds for a handful,
    up to half a second for thousands. A reconcile costs O(size); without the window a burst
    of N pod events would cost O(N * size)."""
    return min(0.5, 0.005 + size * 0.0002)


class WorkQueue:
    def __init__(self, name: str, handler: Callable[[Any], None]):
        self.name = name
        self.handler = handler
        self._items: dict[Hashable, None] = {}  # insertion-ordered set
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._failures: dict[Hashable, int] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: Hashable) -> None:
        if key not in self._items:
            self._items[key] = None
            self._wake.set()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Process `key` in `delay` seconds (or earlier if it is added or due earlier)."""
        if delay <= 0:
            self.add(key)
            return
        when = self.loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = self.loop.call_at(when, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._items.pop(key, None)
        self._failures.pop(key, None)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._items.clear()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._items:
                key = next(iter(self._items))
                del self._items[key]
                self._process(key)
                # Let the HTTP server and the other controllers in between items.
                await asyncio.sleep(0)

    def _process(self, key: Hashable) -> None:
        try:
            self.handler(key)
        except ApiError as exc:
            # NotFound: the object went away meanwhile, its next event says what to do.
            if exc.code != 404:
                self._retry(key, exc)
        except Exception as exc:  # a controller bug must not stop the cluster
            log.exception("%s: reconciling %r failed", self.name, key)
            self._retry(key, exc)
        else:
            self._failures.pop(key, None)

    def _retry(self, key: Hashable, exc: Exception) -> None:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = min(_MAX_BACKOFF, 0.05 * 2 ** min(failures, 12))
        log.debug("%s: retrying %r in %.2fs after %r", self.name, key, delay, exc)
        self.add_after(key, delay)
