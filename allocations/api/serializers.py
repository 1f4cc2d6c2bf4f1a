from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalogue.fields import invisible_characters_refusal
from core.validation import Refused, day

from ..models import ProjectRecord, ResourceRequest
from ..validation import (
    MAX_GRANTS,
    RecordInvalid,
    RequestInvalid,
    record_clean,
    request_clean,
)


@extend_schema_field(OpenApiTypes.DATE)
class DayField(serializers.Field):  # type: ignore[type-arg] # DRF's Field is not generic here
    """An ISO 8601 date, 2000-01-01 to 2100-01-01 (core/validation.py)."""

    def to_internal_value(self, data: Any) -> dt.date:
        try:
            return day(data)
        except Refused as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value: dt.date) -> str:
        return value.isoformat()


def _visible(value: str) -> None:
    refusal = invisible_characters_refusal(value, "The text")
    if refusal:
        raise serializers.ValidationError(refusal)


class ProjectRecordSerializer(serializers.Serializer[ProjectRecord]):
    """A project's record. Writes: admins and the admins of its department."""

    tenant = serializers.IntegerField(source="tenant.pk", read_only=True)
    tenant_name = serializers.CharField(source="tenant.name", read_only=True)
    department = serializers.CharField(source="tenant.department.name", read_only=True,
                                       allow_null=True, default=None)
    principal_investigator = serializers.CharField(
        max_length=255, allow_null=True, required=False,
        help_text="A user of the project: their Keystone user id, or a name only one of them "
                  "has; null: none")
    principal_investigator_name = serializers.CharField(
        source="principal_investigator.label", read_only=True, allow_null=True, default=None)
    grants = serializers.ListField(
        child=serializers.CharField(max_length=100, validators=[_visible]),
        max_length=MAX_GRANTS, required=False, help_text="grant numbers or cost centres")
    field = serializers.CharField(source="research_field", max_length=100, allow_blank=True,
                                  required=False, validators=[_visible],
                                  help_text="the research field")
    allocation_ends = DayField(allow_null=True, required=False,
                               help_text="the allocation's last day; null: no end")
    held = serializers.SerializerMethodField(
        help_text="Past its last day: new launches refused (403 allocation_ended).")

    def get_held(self, record: ProjectRecord) -> bool:
        return record.ended(self.context["today"])

    def to_representation(self, instance: ProjectRecord) -> dict[str, Any]:
        data = super().to_representation(instance)
        pi = instance.principal_investigator
        data["principal_investigator"] = pi.username if pi is not None else None
        return data

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            return record_clean(self.initial_data, tenant=self.context["tenant"])
        except RecordInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None


class RequestSerializer(serializers.ModelSerializer[ResourceRequest]):
    tenant_name = serializers.CharField(source="tenant.name", read_only=True)
    asker = serializers.CharField(source="asker.username", read_only=True, allow_null=True,
                                  default=None, help_text="the asker's Keystone user id")
    asker_name = serializers.CharField(source="asker.label", read_only=True, allow_null=True,
                                       default=None)
    decided_by = serializers.CharField(source="decided_by.label", read_only=True,
                                       allow_null=True, default=None)
    details = serializers.DictField(help_text="quota: {gpu_type, gpus}; budget and allowance: "
                                              "{gpu_hours}; reservation: {gpu_type, count, "
                                              "start, end}; renewal: {allocation_ends}")
    applied = serializers.DictField(allow_null=True, read_only=True,
                                    help_text="what approving changed: {before, after}")

    class Meta:
        model = ResourceRequest
        fields = ["id", "tenant", "tenant_name", "kind", "details", "justification", "ends_at",
                  "state", "note", "asker", "asker_name", "decided_by", "decided_at",
                  "applied", "ended_at", "created_at"]
        read_only_fields = fields


class RequestCreateSerializer(serializers.Serializer[Any]):
    """A request as asked; the one validation is allocations.validation.request_clean."""

    kind = serializers.ChoiceField(choices=ResourceRequest.Kind.choices)
    tenant = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                      help_text="the project's tenant id (default: the "
                                                "caller's current project)")
    details = serializers.DictField()
    justification = serializers.CharField(max_length=4000)
    ends_at = serializers.CharField(required=False, allow_null=True, max_length=64,
                                    help_text="ISO 8601 time a quota, budget or allowance "
                                              "grant ends by itself")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            fields = request_clean(attrs, now=timezone.now())
        except RequestInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None
        return {**fields, "tenant": attrs.get("tenant")}


class RequestChangeSerializer(serializers.Serializer[Any]):
    """The asker's change: the fields given replace the request's own, and the whole is
    checked by allocations.validation.request_clean as when asked (the kind stays)."""

    details = serializers.DictField(required=False)
    justification = serializers.CharField(max_length=4000, required=False)
    ends_at = serializers.CharField(required=False, allow_null=True, max_length=64,
                                    help_text="ISO 8601 time a quota, budget or allowance "
                                              "grant ends by itself; null: for good")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        row: ResourceRequest = self.context["row"]
        whole = {"kind": row.kind, "details": row.details, "justification": row.justification,
                 "ends_at": row.ends_at.isoformat() if row.ends_at else None, **attrs}
        try:
            fields = request_clean(whole, now=timezone.now())
        except RequestInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None
        fields.pop("kind")
        return fields


class DecisionSerializer(serializers.Serializer[Any]):
    note = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="",
                                 validators=[_visible])
