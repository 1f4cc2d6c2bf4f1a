"""When will a queued workload start? Pure: a small simulation of one GPU type's pool.

Kueue tells a waiting workload its place in the queue, and deliberately nothing about time. The
portal estimates it from what it knows: when the running workloads end (their maximum runtime,
a Job's deadline, or the typical duration of similar finished workloads), and how long each
workload ahead will then hold its GPUs. The queue is played forward in order: each workload
starts at the first moment both the pool (the GPUs of its type) and its tenant's reach (nominal
quota plus what it may borrow) have room for it, and frees its GPUs when it is expected to end.

The calendar takes GPUs out of the pool for a while (`Block`s: a maintenance window's, another
tenant's reservation): a waiter whose run would overlap a block, when the GPUs left then are too
few for it beside those held, starts after the block instead.

An estimate is only as good as its inputs, and it says which it used (`basis`). Where a running
workload or one ahead has no expected end, nothing after it can be dated, and the estimate says
so instead of guessing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import itertools
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

# the kinds of knowledge an expected end comes from, best first
LIMIT = "limit"        # a maximum runtime or a Job deadline: it ends by then at the latest
HISTORY = "history"    # the median duration of similar finished workloads
UNKNOWN = "unknown"    # neither: no end can be expected
# what a start waits on besides runs ending: the calendar's blocks
MAINTENANCE = "maintenance"
RESERVATION = "reservation"


@dataclasses.dataclass(frozen=True)
class Holder:
    """A running workload: the GPUs it holds until `ends_at` (None: no expected end)."""

    tenant: Hashable
    gpus: int
    ends_at: dt.datetime | None
    source: str = LIMIT


K = TypeVar("K", bound=Hashable)  # what names a waiter (the portal's: a workload id)


@dataclasses.dataclass(frozen=True)
class Waiter(Generic[K]):
    """A queued workload, in queue order: the GPUs it needs and how long it will hold them."""

    key: K
    tenant: Hashable
    gpus: int
    seconds: float | None
    source: str = LIMIT


@dataclasses.dataclass(frozen=True)
class Block:
    """`gpus` of the pool out from `start` to `end`: for everyone (a maintenance window,
    `tenant` None), or for every tenant but `tenant` (its reservation: GPUs its own workloads
    hold count towards it)."""

    start: dt.datetime
    end: dt.datetime
    gpus: int
    tenant: Hashable | None = None
    source: str = MAINTENANCE


@dataclasses.dataclass(frozen=True)
class Estimate:
    start: dt.datetime | None  # None: no estimate (see basis)
    basis: str

    @property
    def known(self) -> bool:
        return self.start is not None


NEVER = "no estimate: it needs more GPUs than the pool or its tenant's reach has"
NO_LIMIT = "no estimate: the workloads ahead have no time limit"


def _basis(sources: set[str]) -> str:
    if not sources:
        return "GPUs are free now"
    parts = []
    if LIMIT in sources:
        parts.append("maximum runtimes")
    if HISTORY in sources:
        parts.append("the typical duration of similar workloads")
    if MAINTENANCE in sources:
        parts.append("a maintenance window")
    if RESERVATION in sources:
        parts.append("another project's reservation")
    return "from " + " and ".join(parts)


def _clash(start: dt.datetime, seconds: float | None, gpus: int, tenant: Hashable, *,
           capacity: int, used: dict[Hashable, int],
           releases: Sequence[tuple[dt.datetime, int, Hashable, int, str]],
           blocks: Sequence[Block]) -> Block | None:
    """The block in the way of a run of `gpus` from `start` (lasting `seconds`, None: no end)
    beside the GPUs held then (`used` now, less the `releases` due by then): in the first
    stretch where the blocks leave too few, the one that ends first. None: nothing in the
    way."""
    end = None if seconds is None else start + dt.timedelta(seconds=seconds)
    ahead = [b for b in blocks if b.end > start and (end is None or b.start < end)
             and b.tenant != tenant]
    for cut in sorted({start} | {b.start for b in ahead if b.start > start}):
        here = [b for b in ahead if b.start <= cut < b.end]
        if not here:
            continue
        held = dict(used)
        for when, _, owner, back, _ in releases:
            if when <= cut:
                held[owner] -= back
        out = sum(b.gpus if b.tenant is None else max(b.gpus - held.get(b.tenant, 0), 0)
                  for b in here)
        if sum(held.values()) + out + gpus > capacity:
            return min(here, key=lambda b: b.end)
    return None


def estimate_starts(*, now: dt.datetime, capacity: int, reach: dict[Hashable, int],
                    running: Sequence[Holder], queue: Sequence[Waiter[K]],
                    blocks: Sequence[Block] = ()) -> dict[K, Estimate]:
    """The expected start of every waiter (by key), playing the queue forward in order.

    `capacity`: the GPUs of this type in the pool; `reach`: per tenant, the most it may hold at
    once (a tenant absent from it has no limit but the pool). Waiters start in queue order: one
    that must wait holds back those behind it (Kueue's strict first-in, first-out per queue).
    `blocks`: the calendar's (see Block); a waiter's run that cannot fit beside one starts
    after it.
    """
    free = capacity - sum(h.gpus for h in running)
    used: dict[Hashable, int] = {}
    # (when, seq, tenant, gpus, source): GPUs coming back
    releases: list[tuple[dt.datetime, int, Hashable, int, str]] = []
    order = itertools.count()  # ties: first held, first back

    def hold(tenant: Hashable, gpus: int, ends_at: dt.datetime | None, source: str) -> None:
        used[tenant] = used.get(tenant, 0) + gpus
        if ends_at is not None:
            heapq.heappush(releases, (max(ends_at, now), next(order), tenant, gpus,
                                      source))

    for holder in running:
        hold(holder.tenant, holder.gpus, holder.ends_at, holder.source)
    clock = now
    estimates: dict[K, Estimate] = {}
    blocked = False  # an earlier waiter could not be dated: nothing after it can be
    for waiter in queue:
        limit = reach.get(waiter.tenant, capacity)
        if waiter.gpus > capacity or waiter.gpus > limit:
            estimates[waiter.key] = Estimate(None, NEVER)
            continue
        if blocked:
            estimates[waiter.key] = Estimate(None, NO_LIMIT)
            continue
        waited_on: set[str] = set()
        while True:
            while free < waiter.gpus or used.get(waiter.tenant, 0) + waiter.gpus > limit:
                if not releases:
                    break
                when, _, tenant, gpus, source = heapq.heappop(releases)
                clock = max(clock, when)
                free += gpus
                used[tenant] -= gpus
                waited_on.add(source)
            if free < waiter.gpus or used.get(waiter.tenant, 0) + waiter.gpus > limit:
                break
            block = _clash(clock, waiter.seconds, waiter.gpus, waiter.tenant,
                           capacity=capacity, used=used, releases=releases, blocks=blocks)
            if block is None:
                break
            clock = block.end  # after the block; what ended by then is back
            waited_on.add(block.source)
            while releases and releases[0][0] <= clock:
                _, _, tenant, gpus, source = heapq.heappop(releases)
                free += gpus
                used[tenant] -= gpus
                waited_on.add(source)
        if free < waiter.gpus or used.get(waiter.tenant, 0) + waiter.gpus > limit:
            blocked = True  # what is still held has no expected end
            estimates[waiter.key] = Estimate(None, NO_LIMIT)
            continue
        estimates[waiter.key] = Estimate(clock, _basis(waited_on))
        free -= waiter.gpus
        ends = None if waiter.seconds is None else clock + dt.timedelta(seconds=waiter.seconds)
        hold(waiter.tenant, waiter.gpus, ends, waiter.source)
    return estimates
