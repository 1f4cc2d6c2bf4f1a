from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.validation import FieldsInvalid

from ..models import MonthClose, MonthReopen, PriceSheet
from ..validation import prices_clean


def price_field(**options: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=12, decimal_places=4, min_value=0, **options)


def hours_field(**options: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=18, decimal_places=4, **options)


def money_field(**options: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=14, decimal_places=2, **options)


class PricesWriteSerializer(serializers.Serializer[PriceSheet]):
    """The prices in force from a day on, written whole: a GPU type left out is not charged
    from that day; earlier days keep theirs (the history)."""

    effective_from = serializers.DateField(
        required=False, help_text="the first day these prices apply (from midnight in the "
                                  "portal's time zone); default today; never in a closed month")
    gpu = serializers.DictField(
        child=price_field(), required=False,
        help_text="GPU type slug → price per GPU-equivalent and hour (a quarter of a shared "
                  "GPU for an hour costs a quarter)")
    cpu_hour = price_field(required=False, allow_null=True,
                                        help_text="per CPU core and hour; null: not charged")
    storage_gib_month = price_field(
        required=False, allow_null=True,
        help_text="per GiB held a whole month; null: not charged")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """billing/validation.py's prices_clean (the admin page's too); the fields above
        describe the API."""
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["An object is required."]})
        try:
            return prices_clean(data)
        except FieldsInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc


class PriceSheetSerializer(serializers.Serializer[PriceSheet]):
    effective_from = serializers.DateField()
    gpu = serializers.SerializerMethodField()
    cpu_hour = price_field(allow_null=True)
    storage_gib_month = price_field(allow_null=True)
    set_by = serializers.SerializerMethodField()
    set_at = serializers.DateTimeField()

    def get_gpu(self, sheet: PriceSheet) -> dict[str, str]:
        """GPU type slug → price per GPU-equivalent and hour."""
        return {price.gpu_type.slug: str(price.per_hour) for price in sheet.gpu_prices.all()}

    def get_set_by(self, sheet: PriceSheet) -> str | None:
        return sheet.set_by.label if sheet.set_by is not None else None


class PricesSerializer(serializers.Serializer[Any]):
    currency = serializers.CharField()
    in_force = PriceSheetSerializer(allow_null=True, help_text="the prices in force today")
    sheets = PriceSheetSerializer(many=True, help_text="every sheet, newest first")


class MonthCloseRequestSerializer(serializers.Serializer[MonthClose]):
    period = serializers.CharField(max_length=7, help_text="YYYY-MM, a month that is over")


class MonthCloseSerializer(serializers.Serializer[MonthClose]):
    period = serializers.SerializerMethodField()
    currency = serializers.CharField()
    closed_at = serializers.DateTimeField()
    closed_by = serializers.SerializerMethodField(help_text="null: the beat closed it")

    def get_period(self, row: MonthClose) -> str:
        return f"{row.month:%Y-%m}"

    def get_closed_by(self, row: MonthClose) -> str | None:
        return row.closed_by.label if row.closed_by is not None else None




class MonthReopenRequestSerializer(serializers.Serializer[MonthReopen]):
    period = serializers.CharField(max_length=7, help_text="YYYY-MM, a closed month")
    reason = serializers.CharField(max_length=2000, help_text="why it is opened again "
                                                              "(audited)")


class MonthReopenSerializer(serializers.Serializer[MonthReopen]):
    period = serializers.SerializerMethodField()
    reason = serializers.CharField()
    reopened_at = serializers.DateTimeField()
    reopened_by = serializers.SerializerMethodField()

    def get_period(self, row: MonthReopen) -> str:
        return f"{row.month:%Y-%m}"

    def get_reopened_by(self, row: MonthReopen) -> str | None:
        return row.reopened_by.label if row.reopened_by is not None else None


class MonthlyReportFiguresSerializer(serializers.Serializer[Any]):
    """A group's (or the report's) figures: hours to the ten-thousandth, money to the cent
    (the sum of its statement lines' costs, each rounded once, half up)."""

    projects = serializers.IntegerField()
    gpu_hours = hours_field(help_text="GPU-hours in GPU-equivalents")
    gpu_hours_by_type = serializers.DictField(child=hours_field(),
                                              help_text="GPU type slug → GPU-hours")
    cpu_hours = hours_field()
    storage_gib_months = hours_field()
    gpu_cost = money_field()
    cpu_cost = money_field()
    storage_cost = money_field()
    cost = money_field()
    currency = serializers.CharField()


class MonthlyReportRowSerializer(MonthlyReportFiguresSerializer):
    department = serializers.CharField(required=False, help_text="by department")
    tenant_id = serializers.IntegerField(required=False, allow_null=True, help_text="by tenant")
    tenant = serializers.CharField(required=False, help_text="by tenant")
    pi_id = serializers.CharField(required=False, help_text="by pi: a Keystone user id")
    pi = serializers.CharField(required=False, help_text="by pi")
    grant = serializers.CharField(required=False, help_text="by grant: the project's grants")


class MonthlyReportSerializer(serializers.Serializer[Any]):
    period = serializers.CharField()
    group_by = serializers.CharField()
    closed = serializers.BooleanField(help_text="a closed month's figures are its frozen "
                                                "statement's; an open month's are live")
    closed_at = serializers.DateTimeField(allow_null=True)
    currency = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    totals = MonthlyReportFiguresSerializer()
    results = MonthlyReportRowSerializer(many=True)
