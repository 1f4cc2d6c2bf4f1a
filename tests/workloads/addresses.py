"""What the address-pool tests share (tests/workloads/test_addresses.py on kubesim,
tests/realcluster/test_addresses.py with MetalLB): the wait until a pool is full."""

from __future__ import annotations

from tests.support.tracking import state_of, track_until
from workloads.models import Workload
from workloads.tracking.tracker import Tracker


def until_the_pool_is_full(tracker: Tracker, notebooks: list[Workload], *, addresses: int,
                           timeout: float) -> Workload:
    """Track (`track_until`, built on `eventually`) until every notebook runs, `addresses` of
    them with an address of the pool and one waiting because it has none free; return that
    one."""
    def full() -> bool:
        rows = [state_of(n) for n in notebooks]
        return (all(n.state == Workload.State.RUNNING for n in rows)
                and sum(1 for n in rows if n.address) == addresses
                and any("none free" in n.reason for n in rows))

    track_until(tracker, full, timeout=timeout,
                describe=lambda: repr([(n.state, n.address, n.reason) for n in notebooks]))
    (waiting,) = [n for n in notebooks if not n.address]
    return waiting
