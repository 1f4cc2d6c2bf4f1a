from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers

from ..models import Quota, Tenant
from ..quota_validation import MAX_VALUE, QuotaInvalid, quota_changes_clean


class TenantSerializer(serializers.ModelSerializer[Tenant]):
    class Meta:
        model = Tenant
        fields = ["id", "keystone_project_id", "name", "namespace", "state", "state_reason",
                  "last_reconciled_at", "created_at"]
        read_only_fields = fields


def _count(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, max_value=MAX_VALUE, **kwargs)


class QuotaSerializer(serializers.Serializer[Quota]):
    """A tenant's quota. `memory` is in GiB; `max_runtime_minutes` 0 means no limit."""

    gpus_total = _count()
    gpus_by_type = serializers.DictField(child=_count(), allow_empty=True)
    cpu = _count(help_text="CPU cores")
    memory = _count(source="memory_gb", help_text="GiB")
    max_workloads = _count()
    max_runtime_minutes = _count()
    idle_threshold_percent = serializers.IntegerField(min_value=0, max_value=100)
    idle_minutes = serializers.IntegerField(min_value=1, max_value=MAX_VALUE)
    idle_action = serializers.ChoiceField(choices=Quota.IdleAction.choices)
    idle_grace_minutes = _count()
    allow_over_capacity = serializers.BooleanField(
        help_text="Allow limits above the cluster's capacity (e.g. capacity on order).")
    # queueing on Kueue (PORTAL_QUEUEING): the tenant's ClusterQueue in the cohort
    gpu_borrowing_limit = _count(
        allow_null=True, required=False,
        help_text="Queueing: GPUs of each type it may borrow from idle quotas of other "
                  "projects beyond its own; null = no limit, 0 = none.")
    gpu_lending_limit = _count(
        allow_null=True, required=False,
        help_text="Queueing: GPUs of each type others may borrow from its idle quota; "
                  "null = all that is idle, 0 = none.")
    fair_share_weight = serializers.DecimalField(
        max_digits=6, decimal_places=2, min_value=Decimal("0.01"), required=False,
        help_text="Queueing: its weight in fair sharing of borrowed GPUs (default 1).")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """The domain's validation (tenants/quota_validation.py), the page's too; the fields
        above describe the API (OpenAPI) and its answers. May raise CapacityUnknown."""
        assert self.instance is not None, "a quota is only ever updated"
        try:
            return quota_changes_clean(quota=self.instance, data=data, partial=self.partial)
        except QuotaInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc

    def to_representation(self, quota: Quota) -> dict[str, Any]:
        data = super().to_representation(quota)
        data["gpus_by_type"] = quota.gpus_by_type()
        return data
