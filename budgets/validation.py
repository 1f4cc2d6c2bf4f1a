"""The one validation of budget writes: the API's serializer and the admin page both wrap it.

`budget_clean` takes what the caller sent, as JSON types (the page turns its form fields into
that shape first), and answers the budget's fields, or raises BudgetInvalid with the errors per
field; nothing is written either way.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from core.validation import FieldsInvalid, Refused, excerpt, whole_number
from identity.selectors import UserRefused, project_users, user_resolve
from tenants.models import Tenant
from tenants.quota_validation import unknown_gpu_types_refusal

from .models import DEFAULT_WARN_AT, Budget

MAX_GPU_HOURS = Decimal("1000000000")
MAX_WEIGHT = 1000.0


class BudgetInvalid(FieldsInvalid):
    """A budget write refused: `errors` maps each field to what is wrong with it."""


class _Refused(ValueError):
    pass


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)) or \
            not str(value).isascii():  # float() reads "٣" as 3
        raise _Refused("A number is required.")
    try:
        number = float(str(value).strip())
    except ValueError:
        raise _Refused("A number is required.") from None
    if not math.isfinite(number):
        raise _Refused("A number is required.")
    return number


def _gpu_hours(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)) or \
            not str(value).isascii():  # Decimal() reads "٣" as 3
        raise _Refused("A number of GPU-hours is required.")
    try:
        hours = Decimal(str(value).strip())
    except decimal.InvalidOperation:
        raise _Refused("A number of GPU-hours is required.") from None
    if not hours.is_finite() or not Decimal(0) <= hours <= MAX_GPU_HOURS:
        raise _Refused(f"Give a number of GPU-hours from 0 to {MAX_GPU_HOURS}.")
    return hours.quantize(Decimal("0.01"), rounding=decimal.ROUND_HALF_UP)


def _period(value: Any) -> str:
    if value not in Budget.Period.values:
        raise _Refused(f"One of: {', '.join(Budget.Period.values)}.")
    return str(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "on", "off"):
        return value.lower() in ("true", "1", "on")
    raise _Refused("true or false is required.")


def _weights(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise _Refused("A map of GPU type to a weight is required, e.g. {\"t4\": 0.25}.")
    cleaned: dict[str, float] = {}
    for slug, weight in value.items():
        try:
            number = _number(weight)
        except _Refused as exc:
            raise _Refused(f"{excerpt(slug)}: {exc}") from None
        if not 0 <= number <= MAX_WEIGHT:
            raise _Refused(f"{excerpt(slug)}: give a weight from 0 to {MAX_WEIGHT:g}.")
        cleaned[str(slug)] = number
    problem = unknown_gpu_types_refusal(cleaned)
    if problem:
        raise _Refused(problem)
    return cleaned


def _warn_at(value: Any) -> list[int]:
    if isinstance(value, str):  # the page's field: "50, 80, 100"
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise _Refused("A list of percentages is required, e.g. [50, 80, 100].")
    cleaned = set()
    for item in value:
        try:
            cleaned.add(whole_number(item, low=1, high=100))
        except Refused:
            raise _Refused(f"{excerpt(item)}: each threshold is a whole percentage from 1 to "
                           "100.") from None
    return sorted(cleaned)


def _user_caps(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise _Refused("A map of user (Keystone user id, or name) to GPU-hours is required.")
    cleaned: dict[str, float] = {}
    for user, hours in value.items():
        if not str(user).strip():
            raise _Refused("A user is required for each cap.")
        try:
            cleaned[str(user).strip()] = float(_gpu_hours(hours))
        except _Refused as exc:
            raise _Refused(f"{user}: {exc}") from None
    return cleaned


def _caps_by_user_id(caps: dict[str, float], tenant: Tenant, *, fresh: bool = False,
                     ) -> dict[str, float]:
    """The caps keyed by Keystone user id, each for one user of the project (one the portal
    has seen, with a role on it now): a cap for anyone else, or for a name that two of its
    users share, is refused, naming them. Keystone is asked (KeystoneUnavailable); a refusal
    on its cached answer is checked again on a fresh one (a role granted a moment ago)."""
    if not caps:
        return {}
    users = project_users(tenant.keystone_project_id, fresh=fresh)
    by_id: dict[str, float] = {}
    refused: list[str] = []
    for text, hours in caps.items():
        try:
            user = user_resolve(text, among=users, where=f"of {tenant.name}")
        except UserRefused as exc:
            refused.append(str(exc))
            continue
        if user.username in by_id:
            refused.append(f"{user.label} has two caps.")
        by_id[user.username] = hours
    if refused and not fresh:
        return _caps_by_user_id(caps, tenant, fresh=True)
    if refused:
        raise _Refused(" ".join(refused))
    return by_id


# field → (how it is read, default when a whole write leaves it out; None: required)
FIELDS: dict[str, tuple[Any, Any]] = {
    "period": (_period, None),
    "gpu_hours": (_gpu_hours, None),
    "weights": (_weights, dict),
    "hard": (_flag, lambda: False),
    "warn_at": (_warn_at, lambda: list(DEFAULT_WARN_AT)),
    "stop_at_exhaustion": (_flag, lambda: False),
    "user_caps": (_user_caps, dict),
}


def budget_clean(data: Mapping[str, Any], *, tenant: Tenant) -> dict[str, Any]:
    """A budget write (API body, or the page's fields in the same shape) for `tenant` → the
    budget's fields, every one (a budget is written whole: left out, a field takes its
    default). Raises BudgetInvalid with the errors per field. Unknown fields are ignored."""
    if not isinstance(data, Mapping):
        raise BudgetInvalid({"non_field_errors": ["Expected a JSON object."]})
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for field, (read, default) in FIELDS.items():
        if field not in data or data[field] is None:
            if default is None:
                errors[field] = ["This field is required."]
            else:
                cleaned[field] = default()
            continue
        try:
            cleaned[field] = read(data[field])
            if field == "user_caps":
                cleaned[field] = _caps_by_user_id(cleaned[field], tenant)
        except _Refused as exc:
            errors[field] = [str(exc)]
    if errors:
        raise BudgetInvalid(errors)
    return cleaned
