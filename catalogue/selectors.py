"""Reads of the catalogue that apps above it add to: what the calendar says of a GPU type's
capacity ahead (calendars registers it; the catalogue cannot import the apps above it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .models import GpuType

# `outlook(gpu_type, tenant=)` → {free_now, changes: [{at, free, why}], text} or None (the
# cluster cannot say now); registered in an AppConfig.ready
CapacityOutlook = Callable[..., dict[str, Any] | None]
CAPACITY_OUTLOOKS: dict[str, CapacityOutlook] = {}


def register_capacity_outlook(name: str, outlook: CapacityOutlook) -> None:
    CAPACITY_OUTLOOKS[name] = outlook


def capacity_outlook(gpu_type: GpuType, *, tenant: Any = None) -> dict[str, Any] | None:
    """The first registered outlook's answer for the type (None: none registered, or it cannot
    say now)."""
    for outlook in CAPACITY_OUTLOOKS.values():
        return outlook(gpu_type, tenant=tenant)
    return None
