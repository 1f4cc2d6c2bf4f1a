"""Small helpers the controllers share: pod predicates and omit-empty status fields."""

from __future__ import annotations

from typing import Any

from kubesim.scheduler import is_terminal


def is_active(pod: dict) -> bool:
    """Counts towards a controller's replicas: not finished and not being deleted."""
    return not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: dict) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def omit_zero(status: dict[str, Any], *fields: str) -> dict[str, Any]:
    """Go's `omitempty` on int fields: the real API leaves zero counts out of the JSON."""
    for name in fields:
        if not status.get(name):
            status.pop(name, None)
    return status


def condition(status: dict, type_: str) -> dict | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == type_:
            return cond
    return None

