from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.authentication import ServiceUnavailable
from identity.client import KeystoneUnavailable

from ..models import Budget
from ..selectors import BudgetStatus, top_users
from ..validation import BudgetInvalid, budget_clean


class BudgetSerializer(serializers.Serializer[Budget]):
    """A tenant's GPU-hour budget, written whole (a field left out takes its default)."""

    period = serializers.ChoiceField(choices=Budget.Period.choices)
    gpu_hours = serializers.DecimalField(max_digits=12, decimal_places=2, min_value=0,
                                         help_text="weighted GPU-hours per period")
    weights = serializers.DictField(
        child=serializers.FloatField(min_value=0), required=False,
        help_text="GPU type slug → weight (a GPU-hour of it counts this much); unnamed: 1")
    hard = serializers.BooleanField(
        required=False, help_text="At 100 %: new launches refused (403 budget_exhausted) and "
                                  "the Kueue queue held; soft (false): warnings only.")
    warn_at = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=100),
                                    required=False, help_text="percentages told once each "
                                                              "per period (default 50, 80, 100)")
    stop_at_exhaustion = serializers.BooleanField(
        required=False, help_text="At 100 %: running workloads are warned, then stopped after "
                                  "PORTAL_BUDGET_STOP_GRACE_MINUTES.")
    user_caps = serializers.DictField(
        child=serializers.FloatField(min_value=0), required=False,
        help_text="user → GPU-hours of their own per period, for users of the project: each "
                  "by Keystone user id, or by a name only one of them has (stored by id)")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """The domain's validation (budgets/validation.py), the page's too; the fields above
        describe the API (OpenAPI). Its `tenant` comes in the context."""
        try:
            return budget_clean(data, tenant=self.context["tenant"])
        except BudgetInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc
        except KeystoneUnavailable as exc:
            raise ServiceUnavailable() from exc


class BudgetUserSerializer(serializers.Serializer[Any]):
    user_id = serializers.CharField(help_text="the Keystone user id")
    user = serializers.CharField(help_text="the user's name, with the domain where needed")
    domain = serializers.CharField()
    gpu_hours = serializers.FloatField()
    cap = serializers.FloatField(allow_null=True)


class BudgetStatusSerializer(serializers.Serializer[BudgetStatus]):
    """The budget and where it stands now. Without a budget: `gpu_hours` null (no limit), the
    period a calendar month, and `used` still counted."""

    tenant = serializers.IntegerField(source="tenant.pk")
    period = serializers.CharField()
    gpu_hours = serializers.FloatField(allow_null=True)
    weights = serializers.DictField(child=serializers.FloatField(), source="budget.weights",
                                    default=dict)
    hard = serializers.BooleanField(source="budget.hard", default=False)
    warn_at = serializers.ListField(child=serializers.IntegerField(), source="budget.warn_at",
                                    default=list)
    stop_at_exhaustion = serializers.BooleanField(source="budget.stop_at_exhaustion",
                                                  default=False)
    user_caps = serializers.DictField(child=serializers.FloatField(), source="budget.user_caps",
                                      default=dict)
    used = serializers.SerializerMethodField(help_text="weighted GPU-hours this period")
    remaining = serializers.SerializerMethodField()
    percent = serializers.SerializerMethodField()
    exhausted = serializers.BooleanField()
    burn_rate = serializers.SerializerMethodField(
        help_text="weighted GPUs running now (GPU-hours per hour)")
    forecast_exhausted_at = serializers.DateTimeField(
        allow_null=True, help_text="when it runs out at the current rate; null: not before "
                                   "the reset, nothing runs, or used up already")
    period_start = serializers.DateTimeField()
    resets_at = serializers.DateTimeField()
    by_user = serializers.SerializerMethodField()

    def get_used(self, status: BudgetStatus) -> float:
        return round(status.used, 3)

    def get_remaining(self, status: BudgetStatus) -> float | None:
        return None if status.remaining is None else round(status.remaining, 3)

    def get_percent(self, status: BudgetStatus) -> float | None:
        return None if status.percent is None else round(status.percent, 1)

    def get_burn_rate(self, status: BudgetStatus) -> float:
        return round(status.rate, 3)

    @extend_schema_field(BudgetUserSerializer(many=True))
    def get_by_user(self, status: BudgetStatus) -> list[dict[str, Any]]:
        return BudgetUserSerializer(top_users(status), many=True).data  # type: ignore[return-value]
