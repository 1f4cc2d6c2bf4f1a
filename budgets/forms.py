"""The admin's budget form: its fields turned into the shape `validation.budget_clean` reads
(the API's body), so that the page and the API validate alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from identity.models import User

from .models import Budget


class PairsInvalid(ValueError):
    pass


def _pairs(text: str) -> dict[str, str]:
    """"a100=1, t4=0.25" → {"a100": "1", "t4": "0.25"} (commas or new lines between)."""
    pairs: dict[str, str] = {}
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise PairsInvalid(f"{part!r}: write NAME=NUMBER, separated by commas.")
        pairs[name.strip()] = value.strip()
    return pairs


def budget_form_data(post: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The posted fields as a budget body, and the errors of fields that could not be read."""
    data: dict[str, Any] = {"period": post.get("period", ""),
                            "gpu_hours": post.get("gpu_hours", "") or None,
                            "hard": bool(post.get("hard")),
                            "stop_at_exhaustion": bool(post.get("stop_at_exhaustion")),
                            "warn_at": post.get("warn_at", "")}
    errors: dict[str, list[str]] = {}
    for field in ("weights", "user_caps"):
        try:
            data[field] = _pairs(post.get(field, ""))
        except PairsInvalid as exc:
            errors[field] = [str(exc)]
    return data, errors


def budget_form_values(budget: Budget | None) -> dict[str, Any]:
    """A budget (or none) as the form's field values."""
    if budget is None:
        return {"period": "month", "gpu_hours": "", "weights": "", "hard": False,
                "warn_at": "50, 80, 100", "stop_at_exhaustion": False, "user_caps": ""}
    return {"period": budget.period, "gpu_hours": f"{budget.gpu_hours.normalize():f}",
            "weights": ", ".join(f"{k}={v:g}" for k, v in (budget.weights or {}).items()),
            "hard": budget.hard, "warn_at": ", ".join(str(p) for p in budget.warn_at or []),
            "stop_at_exhaustion": budget.stop_at_exhaustion,
            "user_caps": ", ".join(f"{_cap_key(k)}={v:g}" for k, v in (budget.user_caps or {}).items())}


def _cap_key(user_id: str) -> str:
    """How the form writes a cap's user: their name where no other user the portal knows has
    it (the form reads names back), else the Keystone user id the cap is kept under."""
    user = User.objects.filter(username=user_id).first()
    if user is None or not user.name or "=" in user.name or "," in user.name:
        return user_id
    if User.objects.filter(name__iexact=user.name).count() > 1:
        return user_id
    return user.name
