"""What the apps above workloads add to a launch (they import workloads; it cannot import them):
three hooks of core.registry, each with its Protocol and its order.

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

import datetime as dt
from typing import TYPE_CHECKING, Any, Protocol

from catalogue.models import GpuType
from core.registry import Hook
from tenants.models import Tenant

from .eta import Block

if TYPE_CHECKING:
    from .advice import LaunchContext, Note


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
                                        order=("budget", "maintenance"))
CAPACITY_BLOCKS = Hook[CapacityBlocks]("workloads.capacity_blocks", order=("calendars",))
