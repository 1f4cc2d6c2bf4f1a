"""Small helpers the controllers share: pod predicates and omit-empty status fields."""

from __future__ import annotations

from typing import Any

from kubesim.resources import Obj
from kubesim.scheduler import is_terminal


def is_active(pod: Obj) -> bool:
    """Counts towards a controller's replicas: not finished and not being deleted."""
    return not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: Obj) -> bool:
    conditions: list[Obj] = (pod.get("status") or {}).get("conditions") or []
    for cond in conditions:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def omit_zero(status: dict[str, Any], *fields: str) -> dict[str, Any]:
    """Go's `omitempty` on int fields: the real API leaves zero counts out of the JSON."""
    for name in fields:
        if not status.get(name):
            status.pop(name, None)
    return status


def condition(status: Obj, type_: str) -> Obj | None:
    conditions: list[Obj] = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") == type_:
            return cond
    return None

