"""Checks a quota write must pass: one place for the API serializer and the admin page."""

from __future__ import annotations

from typing import Any

from portal.cluster.capacity import gpu_capacity
from portal.kube.client import KubeError
from portal.workloads.models import GpuType

MAX_VALUE = 1_000_000  # anything above is a typo, not a quota


class CapacityUnknown(Exception):
    """The cluster could not be asked how many GPUs it has."""


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
    total = sum(c.allocatable for c in capacity.values())
    if changes.get("gpus_total", 0) > total:
        errors["gpus_total"] = [
            f"The cluster has {total} GPUs in all; set allow_over_capacity to mean it."]
    for slug, gpus in wanted_types.items():
        have = capacity[slug].allocatable if slug in capacity else 0
        if gpus > have:
            errors.setdefault("gpus_by_type", []).append(
                f"{slug}: the cluster has {have} such GPUs; set allow_over_capacity to mean it.")
    return errors


def unknown_gpu_types(slugs) -> list[str]:
    known = set(GpuType.objects.filter(slug__in=list(slugs)).values_list("slug", flat=True))
    return sorted(set(slugs) - known)


def clean_quota_changes(quota, data: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """Validate a quota write (API body or page form) into model changes.

    Raises rest_framework's ValidationError with field errors (nothing is written), or
    CapacityUnknown when the limits must be checked against a cluster that cannot be asked.
    """
    from rest_framework.exceptions import ValidationError

    from .api.serializers import QuotaSerializer

    serializer = QuotaSerializer(quota, data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    changes = dict(serializer.validated_data)
    allow = changes.get("allow_over_capacity", quota.allow_over_capacity)
    errors = over_capacity_errors({**changes, "allow_over_capacity": allow})
    if errors:
        raise ValidationError(errors)
    return changes
