"""The one validation of quota writes: the API's serializer and the admin page both wrap it.

`quota_changes_clean` takes what the caller sent, as JSON types (the page turns its form
fields into that shape first), and answers the model changes, or raises QuotaInvalid with the
errors per field; nothing is written either way. No web framework is needed to call it.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from catalogue.models import GpuType
from cluster.capacity import gpu_capacity
from core.validation import FieldsInvalid, as_whole, excerpt
from kube.client import KubeError

from .models import Quota

MAX_VALUE = 1_000_000  # anything above is a typo, not a quota
MAX_WEIGHT = Decimal("9999.99")


class CapacityUnknown(Exception):
    """The cluster could not be asked how many GPUs it has."""


class QuotaInvalid(FieldsInvalid):
    """A quota write refused: `errors` maps each field to what is wrong with it."""


class _Refused(ValueError):
    pass


def _count(value: Any, *, low: int = 0, high: int = MAX_VALUE) -> int:
    """A whole number in [low, high]: an integer, or a string of one (the page's fields)."""
    number = as_whole(int(value) if isinstance(value, float) and value.is_integer() else value)
    if number is None:
        raise _Refused("A whole number is required.")
    if not low <= number <= high:
        raise _Refused(f"Give a number from {low} to {high}.")
    return number


def _optional_count(value: Any) -> int | None:
    return None if value is None or value == "" else _count(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "on", "off"):
        return value.lower() in ("true", "1", "on")
    raise _Refused("true or false is required.")


def _weight(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)) or \
            not str(value).isascii():  # Decimal() reads "٣" as 3
        raise _Refused("A number is required.")
    try:
        weight = Decimal(str(value).strip())
    except decimal.InvalidOperation:
        raise _Refused("A number is required.") from None
    if not weight.is_finite() or weight.as_tuple().exponent < -2:  # type: ignore[operator]
        raise _Refused("At most two decimal places.")
    if not Decimal("0.01") <= weight <= MAX_WEIGHT:
        raise _Refused(f"Give a weight from 0.01 to {MAX_WEIGHT}.")
    return weight.quantize(Decimal("0.01"))


def _idle_action(value: Any) -> str:
    if value not in Quota.IdleAction.values:
        raise _Refused(f"One of: {', '.join(Quota.IdleAction.values)}.")
    return str(value)


def _gpus_by_type(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise _Refused("A map of GPU type to a number of GPUs is required.")
    cleaned: dict[str, int] = {}
    for slug, gpus in value.items():
        try:
            cleaned[str(slug)] = _count(gpus)
        except _Refused as exc:
            raise _Refused(f"{excerpt(slug)}: {exc}") from None
    problem = unknown_gpu_types_refusal(cleaned)
    if problem:
        raise _Refused(problem)
    return cleaned


# a StorageClass's name as the API server takes it (a DNS subdomain), bounded by the row's field
STORAGE_CLASS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
MAX_STORAGE_CLASSES = 32


def _storage_by_class(value: Any) -> dict[str, dict[str, int | None]]:
    """{class: {storage_gib?, volumes?}}: the whole set of per-class limits (a class left out
    has none)."""
    if not isinstance(value, Mapping):
        raise _Refused("A map of storage class to {storage_gib, volumes} is required.")
    if len(value) > MAX_STORAGE_CLASSES:
        raise _Refused(f"At most {MAX_STORAGE_CLASSES} storage classes.")
    cleaned: dict[str, dict[str, int | None]] = {}
    for name, limits in value.items():
        if not isinstance(name, str) or len(name) > 63 or not STORAGE_CLASS_NAME.fullmatch(name):
            raise _Refused(f"{excerpt(name)} is not a storage class's name.")
        if not isinstance(limits, Mapping) or set(limits) - {"storage_gib", "volumes"}:
            raise _Refused(f"{name}: {{storage_gib, volumes}}, either or both.")
        try:
            limit = {key: _optional_count(limits.get(key)) for key in ("storage_gib", "volumes")}
        except _Refused as exc:
            raise _Refused(f"{name}: {exc}") from None
        if all(amount is None for amount in limit.values()):
            raise _Refused(f"{name}: give its GiB, its volumes or both.")
        cleaned[name] = limit
    return cleaned


# field sent → (model field, how it is read, needed in a whole write)
FIELDS: dict[str, tuple[str, Any, bool]] = {
    "gpus_total": ("gpus_total", _count, True),
    "gpus_by_type": ("gpus_by_type", _gpus_by_type, True),
    "cpu": ("cpu", _count, True),
    "memory": ("memory_gb", _count, True),
    "max_workloads": ("max_workloads", _count, True),
    "max_runtime_minutes": ("max_runtime_minutes", _count, True),
    "idle_threshold_percent": ("idle_threshold_percent", lambda v: _count(v, high=100), True),
    "idle_minutes": ("idle_minutes", lambda v: _count(v, low=1), True),
    "idle_action": ("idle_action", _idle_action, True),
    "idle_grace_minutes": ("idle_grace_minutes", _count, True),
    "allow_over_capacity": ("allow_over_capacity", _flag, True),
    # volumes: optional in a whole write too (written before volumes were the portal's)
    "storage_gib": ("storage_gib", _count, False),
    "volumes": ("volumes", _count, False),
    # within storage classes: rows of their own (StorageClassQuota), written whole
    "storage_by_class": ("storage_by_class", _storage_by_class, False),
    # queueing on Kueue: optional in a whole write too
    "gpu_borrowing_limit": ("gpu_borrowing_limit", _optional_count, False),
    "gpu_lending_limit": ("gpu_lending_limit", _optional_count, False),
    "fair_share_weight": ("fair_share_weight", _weight, False),
}


def quota_changes_clean(*, quota: Quota, data: Mapping[str, Any], partial: bool
                        ) -> dict[str, Any]:
    """A quota write (API body, or the page's fields in the same shape) → the model changes.

    `partial`: only the fields sent change (PATCH, the page); otherwise every field is needed
    (PUT). Raises QuotaInvalid with the errors per field, or CapacityUnknown when limits must be
    checked against a cluster that cannot be asked. Unknown fields are ignored, as the API
    always did."""
    if not isinstance(data, Mapping):
        raise QuotaInvalid({"non_field_errors": ["Expected a JSON object."]})
    changes: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for field, (model_field, read, needed) in FIELDS.items():
        if field not in data:
            if needed and not partial:
                errors[field] = ["This field is required."]
            continue
        try:
            changes[model_field] = read(data[field])
        except _Refused as exc:
            errors[field] = [str(exc)]
    if errors:
        raise QuotaInvalid(errors)
    allow = changes.get("allow_over_capacity", quota.allow_over_capacity)
    errors = over_capacity_errors({**changes, "allow_over_capacity": allow})
    if errors:
        raise QuotaInvalid(errors)
    return changes


def over_capacity_errors(changes: dict[str, Any]) -> dict[str, list[str]]:
    """Field errors for GPU limits above what the cluster has (unless marked as intended)."""
    if changes.get("allow_over_capacity"):
        return {}
    wanted_types = changes.get("gpus_by_type") or {}
    if "gpus_total" not in changes and not any(wanted_types.values()):
        return {}
    try:
        capacity = gpu_capacity()
    except KubeError as exc:
        raise CapacityUnknown(str(exc)) from exc
    errors: dict[str, list[str]] = {}
    # GPU-equivalents, as the total counts: a unit of a shared type is a part of a GPU
    fractions = {t.slug: t.gpu_fraction for t in GpuType.objects.filter(slug__in=capacity)}
    total = math.floor(sum((c.allocatable * fractions.get(slug, Fraction(1))
                            for slug, c in capacity.items()), Fraction(0)))
    if changes.get("gpus_total", 0) > total:
        errors["gpus_total"] = [
            f"The cluster has {total} GPUs in all; set allow_over_capacity to mean it."]
    for slug, gpus in wanted_types.items():
        have = capacity[slug].allocatable if slug in capacity else 0
        if gpus > have:
            errors.setdefault("gpus_by_type", []).append(
                f"{slug}: the cluster has {have} such GPUs; set allow_over_capacity to mean it.")
    return errors


def unknown_gpu_types(slugs: Iterable[str]) -> list[str]:
    known = set(GpuType.objects.filter(slug__in=list(slugs)).values_list("slug", flat=True))
    return sorted(set(slugs) - known)


def unknown_gpu_types_refusal(slugs: Iterable[str]) -> str | None:
    """What refuses `slugs` that name no GPU type (the first few of them), or None."""
    unknown = unknown_gpu_types(slugs)
    if not unknown:
        return None
    named = ", ".join(excerpt(slug, quotes=False) for slug in unknown[:5])
    return f"unknown GPU type(s): {named}" + (f" and {len(unknown) - 5} more"
                                               if len(unknown) > 5 else "")
