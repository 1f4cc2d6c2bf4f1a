"""What the maintenance windows say at launch: registered with workloads' hooks in apps.py
(workloads cannot import this app).

- `maintenance_admission_check` runs inside the launch's transaction (the tenant row locked):
  a launch whose maximum runtime would still run at a live window's start is placed off that
  window's nodes (request["avoid_nodes"], frozen into its launch spec: its pods get a required
  node affinity `kubernetes.io/hostname NotIn`), or refused with 403 `maintenance_window` when
  the type's other nodes could never hold it — 403 as every admission refusal is (the API maps
  them all to one status): the launch as asked is not allowed; the message says what would be
  (a shorter maximum runtime, a later launch).
- `maintenance_launch_advice` tells the same before submit (the launch advice: the launch
  page's live check, `POST workloads/check/`), from the windows of the calendar the process
  holds (cache.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tenants.models import Quota, Tenant
from workloads.hooks import LaunchContext, Note
from workloads.services import AdmissionRefused

from .cache import shared_live_windows
from .maintenance import duration_text, launch_placement, runtime_seconds, when_text


class MaintenanceWindowRefused(AdmissionRefused):
    """A launch that would cross a maintenance window and that no node outside it can hold."""

    code = "maintenance_window"


def maintenance_admission_check(*, tenant: Tenant, user: Any, request: dict[str, Any]) -> None:
    minutes = request.get("max_runtime_minutes") or None
    # the quota's maximum runtime counts only for a launch without one of its own
    quota = None if minutes else Quota.objects.filter(tenant=tenant).first()
    placement = launch_placement(
        gpu_type=request["gpu_type"], gpus_per_node=request["gpu_count"],
        nodes=request.get("nodes", 1), seconds=runtime_seconds(minutes, quota))
    if placement.refusal:
        raise MaintenanceWindowRefused(placement.refusal)
    if placement.avoid:
        request["avoid_nodes"] = sorted(set(request.get("avoid_nodes") or ()) |
                                        set(placement.avoid))


def maintenance_launch_advice(launch: LaunchContext) -> list[Note]:
    """A launch whose maximum runtime would cross a window: placed off its nodes (info), or
    refused at submit as admission would (an error when the type's nodes outside the windows
    have fewer GPUs in all than it asks for, else a warning: a shorter runtime or a later
    launch fits)."""
    minutes = launch.max_runtime_minutes  # its own, else its quota's
    placement = launch_placement(
        gpu_type=launch.gpu_type, gpus_per_node=launch.gpus_per_node, nodes=launch.nodes,
        seconds=minutes * 60 if minutes else None, now=launch.now,
        windows=shared_live_windows(launch.shared, launch.now))
    if placement.refusal:
        return [("error" if placement.never else "warning", placement.refusal)]
    if not placement.windows:
        return []
    first = min(placement.windows, key=lambda w: w.start)
    runtime = (f"Its maximum runtime ({duration_text(dt.timedelta(minutes=minutes))})"
               if minutes else "With no maximum runtime it")
    return [("info", f"{runtime} would cross maintenance #{first.pk} ({first.reason}) from "
                     f"{when_text(first.start)} to {when_text(first.end)}: it is placed on other "
                     f"{launch.gpu_type.slug} nodes than {', '.join(placement.avoid)}.")]
