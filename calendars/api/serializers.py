from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import WholeNumberField

from ..models import MaintenanceWindow, Reservation, ReservationAllowance
from ..reservations import end_rule_text
from ..validation import ReservationInvalid, WindowInvalid, reservation_clean, window_clean


class ReservationWriteSerializer(serializers.Serializer[Reservation]):
    """A booking. `tenant`: a tenant id (admins book for any tenant; a manager for their
    current project, which is the default)."""

    tenant = serializers.IntegerField(required=False)
    gpu_type = serializers.SlugField()
    count = serializers.IntegerField(min_value=1)
    start = serializers.DateTimeField(help_text="ISO 8601 with a zone")
    end = serializers.DateTimeField()
    recurrence = serializers.ChoiceField(choices=Reservation.Recurrence.choices, required=False,
                                         allow_blank=True, help_text="\"weekly\": every week "
                                         "at the same time until `until`")
    until = serializers.DateTimeField(required=False, allow_null=True)
    note = serializers.CharField(required=False, allow_blank=True, max_length=500)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["A JSON object is required."]})
        try:
            fields = reservation_clean(data)
        except ReservationInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc
        tenant = data.get("tenant")
        if tenant is not None and (isinstance(tenant, bool) or not isinstance(tenant, int)):
            raise serializers.ValidationError({"tenant": ["A tenant id is required."]})
        return {**fields, "tenant": tenant}


class ReservationSerializer(serializers.ModelSerializer[Reservation]):
    tenant = serializers.IntegerField(source="tenant.pk")
    tenant_name = serializers.CharField(source="tenant.name")
    gpu_type = serializers.CharField(source="gpu_type.slug")
    created_by = serializers.CharField(source="created_by.label", default=None, allow_null=True)
    state = serializers.SerializerMethodField()
    next_occurrence = serializers.SerializerMethodField()
    end_grace_minutes = serializers.SerializerMethodField()
    at_end = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = ["id", "tenant", "tenant_name", "gpu_type", "count", "start", "end",
                  "recurrence", "until", "note", "created_by", "against_allowance",
                  "created_at", "cancelled_at", "state", "next_occurrence",
                  "end_grace_minutes", "at_end"]

    def get_end_grace_minutes(self, reservation: Reservation) -> int:
        """Minutes after an occurrence's end (or the cancellation) at which the project's
        workloads still beyond its quota are put back in line or stopped."""
        return int(settings.PORTAL_RESERVATION_END_GRACE_MINUTES)

    def get_at_end(self, reservation: Reservation) -> str:
        """What its end (or a cancellation) does to the workloads it let run, in words."""
        return end_rule_text()

    def _next(self, reservation: Reservation) -> tuple[Any, Any] | None:
        now = timezone.now()
        return next(reservation.occurrences(now, reservation.last_end + reservation.duration),
                    None)

    def get_state(self, reservation: Reservation) -> str:
        """cancelled, active (an occurrence runs now), upcoming, or ended."""
        if reservation.cancelled_at is not None:
            return "cancelled"
        occurrence = self._next(reservation)
        if occurrence is None:
            return "ended"
        return "active" if occurrence[0] <= timezone.now() else "upcoming"

    def get_next_occurrence(self, reservation: Reservation) -> dict[str, Any] | None:
        occurrence = self._next(reservation) if reservation.cancelled_at is None else None
        if occurrence is None:
            return None
        return {"start": occurrence[0].isoformat(), "end": occurrence[1].isoformat()}


class RelayoutTargetSerializer(serializers.Serializer[Any]):
    """One node's layout to be: exactly one of the two."""

    mig_config = serializers.CharField(required=False, max_length=63,
                                       help_text="the GPU operator's MIG layout: all-1g.10gb, "
                                                 "all-3g.40gb, all-balanced, all-disabled …")
    replicas = serializers.IntegerField(required=False, min_value=1, max_value=64,
                                        help_text="time-slicing replicas per GPU (1: none)")


class RelayoutPlanTypeSerializer(serializers.Serializer[Any]):
    gpu_type = serializers.CharField()
    before = serializers.IntegerField(help_text="units in the cluster now")
    after = serializers.IntegerField(help_text="units once the nodes are laid out")


class RelayoutPlanSerializer(serializers.Serializer[Any]):
    nodes = serializers.DictField(child=serializers.CharField(),
                                  help_text="{node: its change in words}")
    gpu_types = RelayoutPlanTypeSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField(),
                                     help_text="quotas beyond what would exist, units no GPU "
                                               "type offers (quotas are not changed)")


class RelayoutStateSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=["waiting", "relabelled", "applied", "failed"])
    reason = serializers.CharField()
    at = serializers.DateTimeField()


class WindowWriteSerializer(serializers.Serializer[MaintenanceWindow]):
    """Exactly one of nodes, node_selector or gpu_type says what it covers. `relayout` lays its
    named nodes out anew after the drain (drain must be true)."""

    nodes = serializers.ListField(child=serializers.CharField(), required=False)
    node_selector = serializers.DictField(child=serializers.CharField(), required=False,
                                          help_text="{label: value}, or \"k=v,k2=v2\"")
    gpu_type = serializers.SlugField(required=False)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    reason = serializers.CharField(max_length=500)
    drain = serializers.BooleanField(required=False, default=False,
                                     help_text="at the start, stop what still runs on the "
                                               "nodes (batch jobs requeued)")
    relayout = serializers.DictField(child=RelayoutTargetSerializer(), required=False,
                                     help_text="{node name: layout to be}, nodes of the "
                                               "window's `nodes`")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["A JSON object is required."]})
        try:
            return window_clean(data)
        except WindowInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc


class WindowSerializer(serializers.ModelSerializer[MaintenanceWindow]):
    gpu_type = serializers.CharField(source="gpu_type.slug", default=None)
    created_by = serializers.CharField(source="created_by.label", default=None, allow_null=True)
    covers = serializers.CharField(source="target_text")
    relayout = serializers.DictField(child=RelayoutTargetSerializer(), read_only=True)
    relayout_plan = serializers.SerializerMethodField(
        help_text="what the re-layout does, as announced (null: none)")
    relayout_state = serializers.DictField(child=RelayoutStateSerializer(), read_only=True,
                                           help_text="{node: how far its re-layout is}")

    class Meta:
        model = MaintenanceWindow
        fields = ["id", "nodes", "node_selector", "gpu_type", "covers", "start", "end", "reason",
                  "drain", "state", "affected", "created_by", "created_at", "cancelled_at",
                  "cordoned", "cordoned_at", "drained_at", "ended_at", "relayout",
                  "relayout_plan", "relayout_state"]

    @extend_schema_field(RelayoutPlanSerializer(allow_null=True))
    def get_relayout_plan(self, window: MaintenanceWindow) -> dict[str, Any] | None:
        return window.relayout_plan or None


class AllowanceSerializer(serializers.ModelSerializer[ReservationAllowance]):
    gpu_hours = WholeNumberField(min_value=0, max_value=10_000_000,
                                 help_text="GPU-hours of reservations to come that the "
                                           "tenant's managers may hold at once (one "
                                           "cancelled while it ran keeps what it used "
                                           "until its planned end)")
    max_days_ahead = WholeNumberField(min_value=0, max_value=366, required=False, default=90)

    class Meta:
        model = ReservationAllowance
        fields = ["gpu_hours", "max_days_ahead"]


class SegmentSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    reserved = serializers.IntegerField()
    maintenance = serializers.IntegerField()
    bookable = serializers.IntegerField(help_text="what a further reservation could book")


class CalendarEntrySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(allow_null=True)
    tenant = serializers.CharField(allow_null=True, help_text="null: another project's")
    count = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    note = serializers.CharField()
    released = serializers.BooleanField()


class CalendarWindowSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    gpus = serializers.IntegerField()
    reason = serializers.CharField()
    covers = serializers.CharField()


class CalendarSerializer(serializers.Serializer[Any]):
    gpu_type = serializers.CharField()
    capacity = serializers.IntegerField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    segments = SegmentSerializer(many=True)
    reservations = CalendarEntrySerializer(many=True)
    windows = CalendarWindowSerializer(many=True)
