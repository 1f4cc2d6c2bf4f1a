from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalogue.fields import invisible_characters_refusal

from ..models import Department, Quota, QuotaAdjustment, Tenant, TenantCluster
from ..quota_validation import (
    MAX_VALUE,
    QuotaInvalid,
    quota_changes_clean,
    unknown_gpu_types_refusal,
)
from ..selectors import department_standing, quota_figures, tenant_cluster_states


class TenantClusterStateSerializer(serializers.Serializer[dict[str, Any]]):
    cluster = serializers.CharField()
    state = serializers.ChoiceField(choices=sorted({*Tenant.State.values,
                                                   *TenantCluster.State.values}))
    reason = serializers.CharField(allow_blank=True)
    last_reconciled_at = serializers.DateTimeField(allow_null=True)


class TenantSerializer(serializers.ModelSerializer[Tenant]):
    cluster_states = serializers.SerializerMethodField(
        help_text="its namespace on each cluster it may use, as the last reconcile there found "
                  "it: the home cluster's (the tenant's own state) first")
    clusters = serializers.SerializerMethodField(
        help_text="the clusters its workloads may run on (names); empty: every enabled cluster")
    department: serializers.PrimaryKeyRelatedField[Department] = \
        serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True,
                                           help_text="The department's id; null: in none.")
    department_name = serializers.CharField(source="department.name", read_only=True,
                                            allow_null=True, default=None)

    class Meta:
        model = Tenant
        fields = ["id", "keystone_project_id", "name", "namespace", "state", "state_reason",
                  "clusters", "cluster_states", "last_reconciled_at", "created_at", "department",
                  "department_name"]
        read_only_fields = fields

    @extend_schema_field(TenantClusterStateSerializer(many=True))
    def get_cluster_states(self, tenant: Tenant) -> list[dict[str, object]]:
        return tenant_cluster_states(tenant)

    def get_clusters(self, tenant: Tenant) -> list[str]:
        return sorted(cluster.name for cluster in tenant.clusters.all())  # prefetched


class TenantClustersSerializer(serializers.Serializer[dict[str, Any]]):
    clusters = serializers.ListField(
        child=serializers.SlugField(max_length=40), max_length=64,
        help_text="cluster names (GET clusters/); empty: every enabled cluster")


class TenantChangeSerializer(serializers.Serializer[Any]):
    """What `PATCH tenants/{id}/` changes (admins): the project's department."""

    department = serializers.PrimaryKeyRelatedField(
        queryset=Department.objects.all(), allow_null=True,
        help_text="A department's id; null takes the project out of its department.")


MAX_GPU_TYPES = 64
PROJECT_ID = re.compile(r"[0-9A-Za-z_-]+", re.ASCII)


def _name_visible(value: str) -> None:
    refusal = invisible_characters_refusal(value)
    if refusal:
        raise serializers.ValidationError(refusal)


class DepartmentSerializer(serializers.ModelSerializer[Department]):
    name = serializers.CharField(max_length=100, validators=[_name_visible])
    description = serializers.CharField(max_length=2000, allow_blank=True, required=False)
    keystone_project_id = serializers.CharField(
        max_length=64, allow_blank=True, required=False,
        help_text="The Keystone project whose managers are the department's admins (they act "
                  "for its projects with a token of that project).")
    gpu_cap = serializers.IntegerField(min_value=0, max_value=MAX_VALUE, allow_null=True,
                                       required=False,
                                       help_text="GPU-equivalents its projects hold together; "
                                                 "null: no cap of its own")
    gpu_caps_by_type = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_VALUE), required=False,
        help_text="{GPU type slug: GPUs of the type its projects hold together}; the whole set "
                  "(a type left out has no cap of its own)")
    tenants = serializers.SerializerMethodField()

    class Meta:
        model = Department
        fields = ["id", "name", "description", "keystone_project_id", "gpu_cap",
                  "gpu_caps_by_type", "tenants", "created_at", "updated_at"]
        read_only_fields = ["id", "tenants", "created_at", "updated_at"]

    def get_tenants(self, department: Department) -> list[str]:
        """The names of its projects."""
        return [tenant.name for tenant in department.tenants.all()]

    def validate_name(self, value: str) -> str:
        taken = Department.objects.filter(name__iexact=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("A department of this name exists already.")
        return value

    def validate_gpu_caps_by_type(self, value: dict[str, int]) -> dict[str, int]:
        if len(value) > MAX_GPU_TYPES:
            raise serializers.ValidationError(f"At most {MAX_GPU_TYPES} GPU types.")
        problem = unknown_gpu_types_refusal(value)
        if problem:
            raise serializers.ValidationError(problem[:1].upper() + problem[1:] + ".")
        return value

    def validate_keystone_project_id(self, value: str) -> str:
        if not value:
            return value
        if not PROJECT_ID.fullmatch(value):
            raise serializers.ValidationError("A Keystone project id: letters, digits, - and _.")
        taken = Department.objects.filter(keystone_project_id=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("Another department has this project already.")
        return value


class DepartmentUseTypeSerializer(serializers.Serializer[Any]):
    gpu_type = serializers.CharField()
    used = serializers.IntegerField(help_text="units its projects' active workloads hold")
    quotas = serializers.IntegerField(help_text="its projects' quotas in force together")
    cap = serializers.IntegerField(allow_null=True, help_text="units its projects may hold "
                                   "together (the type's cap, within the cap in all); null: none")
    left = serializers.IntegerField(allow_null=True, help_text="cap − used, never below 0")


class DepartmentUseTotalSerializer(serializers.Serializer[Any]):
    used = serializers.FloatField(help_text="GPU-equivalents in use (a unit of a shared type "
                                            "weighs its part of a GPU)")
    used_text = serializers.CharField()
    quotas = serializers.IntegerField(help_text="its projects' quota totals in force together")
    cap = serializers.IntegerField(allow_null=True, help_text="the cap in all; null: none")
    left = serializers.FloatField(allow_null=True)
    left_text = serializers.CharField()


class DepartmentUseSerializer(serializers.Serializer[Any]):
    """What the department's projects use now against its caps, as the admission counts it."""

    gpus_by_type = DepartmentUseTypeSerializer(many=True)
    gpus_total = DepartmentUseTotalSerializer()
    workloads = serializers.IntegerField(help_text="its projects' active workloads")


class DepartmentDetailSerializer(DepartmentSerializer):
    """One department, with what its projects use now against its caps."""

    use = serializers.SerializerMethodField()

    class Meta(DepartmentSerializer.Meta):
        fields = [*DepartmentSerializer.Meta.fields, "use"]
        read_only_fields = [*DepartmentSerializer.Meta.read_only_fields, "use"]

    @extend_schema_field(DepartmentUseSerializer)
    def get_use(self, department: Department) -> dict[str, Any]:
        return department_standing(department).as_data()


def _count(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, max_value=MAX_VALUE, **kwargs)


class QuotaInForceSerializer(serializers.Serializer[Any]):
    """The quota in force now: the admin's, with its adjustments in force (read only)."""

    gpus_total = serializers.IntegerField()
    gpus_by_type = serializers.DictField(child=serializers.IntegerField())
    cpu = serializers.IntegerField(help_text="CPU cores")
    memory = serializers.IntegerField(help_text="GiB")
    storage_gib = serializers.IntegerField(help_text="GiB of volumes in all")
    volumes = serializers.IntegerField(help_text="volumes at once")
    held = serializers.BooleanField(help_text="Kueue admits nothing new from its queue.")
    held_reason = serializers.CharField(help_text="Why, while held; else empty.")
    text = serializers.CharField(
        help_text="What differs from the quota as set, in the portal's words (\"4 a100 "
                  "nominal, +4 reserved until … → 8 in force; …\"); empty when nothing "
                  "adjusts it.")
    gpus_by_type_text = serializers.DictField(
        child=serializers.CharField(),
        help_text="Per GPU type that adjustments change: how its figure in force comes about.")


class QuotaAdjustmentSerializer(serializers.Serializer[Any]):
    """One adjustment in force (read only; the portal writes them)."""

    # a field named like Field.source: DRF's metaclass takes it out of the class attributes
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=QuotaAdjustment.Source.choices)
    kind = serializers.ChoiceField(choices=QuotaAdjustment.Kind.choices,
                                   help_text="delta: GPUs added (> 0) or withheld (< 0); "
                                             "hold: the queue held")
    gpu_type = serializers.CharField(allow_null=True, help_text="null: the total, or a hold")
    gpus = serializers.IntegerField()
    reason = serializers.CharField()
    ref = serializers.CharField(help_text="what of the source it stands for")
    starts_at = serializers.DateTimeField(allow_null=True)
    ends_at = serializers.DateTimeField(allow_null=True)
    text = serializers.CharField(help_text="The adjustment in the portal's words (\"+4 a100 "
                                           "reserved until …: reservation #7 (4 a100)\").")


class StorageClassLimitSerializer(serializers.Serializer[Any]):
    storage_gib = _count(allow_null=True, required=False,
                         help_text="GiB of volumes of the class in all; null: not bounded")
    volumes = _count(allow_null=True, required=False,
                     help_text="volumes of the class at once; null: not bounded")


class QuotaSerializer(serializers.Serializer[Quota]):
    """A tenant's quota. `memory` is in GiB; `max_runtime_minutes` 0 means no limit. The fields
    an admin writes are the nominal quota; `in_force` and `adjustments` (read only) say what
    counts now (a running reservation, maintenance, a budget's hold)."""

    gpus_total = _count()
    gpus_by_type = serializers.DictField(child=_count(), allow_empty=True)
    cpu = _count(help_text="CPU cores")
    memory = _count(source="memory_gb", help_text="GiB")
    max_workloads = _count()
    max_runtime_minutes = _count()
    storage_gib = _count(required=False, help_text="GiB the project's volumes may ask for "
                                                   "in all (also the namespace's "
                                                   "requests.storage)")
    volumes = _count(required=False, help_text="How many volumes the project may have at once "
                                               "(also its persistentvolumeclaims)")
    storage_by_class = serializers.DictField(
        child=StorageClassLimitSerializer(), required=False, allow_empty=True,
        help_text="Within storage classes, where set: {class: {storage_gib, volumes}} (either "
                  "null: only the quota in all bounds it); the namespace's ResourceQuota "
                  "carries <class>.storageclass.storage.k8s.io/requests.storage and "
                  "/persistentvolumeclaims. A write replaces them all; {} removes them.")
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

    # both from quota_figures (to_representation): the sources name nothing of the row, so
    # that the quota's own `adjustments` rows are not read and serialized for nothing first
    in_force = QuotaInForceSerializer(read_only=True, source="figures_in_force")
    adjustments = QuotaAdjustmentSerializer(many=True, read_only=True,
                                            source="figures_adjustments")

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
        data["storage_by_class"] = quota.storage_by_class()
        data.update(quota_figures(quota.tenant, quota=quota).as_data())
        return data
