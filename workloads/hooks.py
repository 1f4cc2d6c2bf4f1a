"""What the apps above workloads add to a launch (they import workloads; it cannot import them):
three hooks of core.registry, each with its Protocol and its order, and the LaunchContext an
advisor is given.

- LAUNCH_ADVISORS: what a launch is told before it is submitted (advice.launch_advice: the
  launch page's live check and `POST workloads/check/` alike). Every advisor reads the one
  LaunchContext of the check and answers notes; all the notes are shown, in this order.
- ADMISSION_CHECKS: what may refuse a launch inside its transaction, after the quota check,
  with the tenant row locked (so concurrent launches of a tenant are serialised). A check
  raises an AdmissionRefused (a subclass with its own `code`) to refuse; it may also place the
  launch: node names it puts in request["avoid_nodes"] are frozen into the launch spec and its
  pods are kept off them (a maintenance window). Every check runs, in this order.
- CAPACITY_BLOCKS: who takes GPUs of a type out of the pool for a while (the calendar's
  maintenance windows and reservations): the queue estimate plays around every entry's blocks.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Protocol

from catalogue.models import GpuType, Template
from cluster.capacity import GpuTypeCapacity
from core.registry import Hook, SharedReads
from tenants.figures import QuotaFigures
from tenants.models import Tenant

from .eta import Block
from .selectors import TenantGpuReads

# (level, message); level error (it can never run) | warning | info
Note = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class LaunchContext:
    """A launch as its advisors see it, and what one check reads for all of them."""

    tenant: Tenant
    user: Any
    gpu_type: GpuType
    template: Template | None  # None: not chosen yet (the page's check)
    gpus_per_node: int
    nodes: int
    # the launch's own maximum runtime, else its quota's; None: no limit
    max_runtime_minutes: int | None
    now: dt.datetime
    reads: TenantGpuReads
    shared: SharedReads

    @property
    def gpus(self) -> int:
        """What the quota counts: the GPUs of every node."""
        return self.gpus_per_node * self.nodes

    @property
    def figures(self) -> QuotaFigures:
        """The tenant's quota figures in force, with their use."""
        return self.reads.figures

    @property
    def capacity(self) -> GpuTypeCapacity | None:
        """The type's capacity view; None when the cluster did not answer."""
        return self.reads.type_capacity(self.gpu_type.slug)



class LaunchAdvisor(Protocol):
    def __call__(self, launch: LaunchContext) -> list[Note]: ...


class AdmissionCheck(Protocol):
    def __call__(self, *, tenant: Tenant, user: Any, request: dict[str, Any]) -> None: ...


class CapacityBlocks(Protocol):
    """The blocks of `gpu_type` from `now` on."""

    def __call__(self, gpu_type: GpuType, now: dt.datetime) -> list[Block]: ...


# "fit" first: whether the cluster and the quota can hold it at all; the calendar's last, its
# capacity outlook closing the list
LAUNCH_ADVISORS = Hook[LaunchAdvisor]("workloads.launch_advisors", order=(
    "fit", "budget", "maintenance", "reservation", "capacity-outlook"))
ADMISSION_CHECKS = Hook[AdmissionCheck]("workloads.admission_checks",
                                        order=("allocation", "budget", "maintenance"))
CAPACITY_BLOCKS = Hook[CapacityBlocks]("workloads.capacity_blocks", order=("calendars",))
