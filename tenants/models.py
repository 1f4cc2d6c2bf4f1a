"""Tenants (Keystone projects with a namespace), their quotas, and the audit trail."""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .querysets import GpuQuotaQuerySet, QuotaQuerySet, TenantQuerySet


class Tenant(models.Model):
    class State(models.TextChoices):
        NEW = "new", "new"  # seen, namespace not provisioned yet
        PROVISIONED = "provisioned", "provisioned"
        DRIFTED = "drifted", "drifted"  # the last reconcile found and repaired drift
        FAILED = "failed", "failed"
        DELETING = "deleting", "deleting"
        DELETED = "deleted", "deleted"

    keystone_project_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255)
    domain_id = models.CharField(max_length=64, default="default")
    namespace = models.CharField(max_length=63, unique=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    state_reason = models.TextField(blank=True, default="")
    last_reconciled_at = models.DateTimeField(null=True, blank=True)
    # image registries/prefixes the tenant may launch (empty: any), e.g. ["nvcr.io/nvidia"]
    image_prefixes = models.JSONField(default=list, blank=True)
    # an admin lets the tenant run templates that may run as root: its namespace then enforces
    # Pod Security "baseline" where the site's level is "restricted" (tenants.selectors)
    allow_root_templates = models.BooleanField(default=False)
    delete_after = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.state not in (self.State.DELETING, self.State.DELETED)


class Quota(models.Model):
    """What a tenant may use at once. Enforced by the portal at admission and by Kubernetes'
    ResourceQuota in the tenant's namespace."""

    class IdleAction(models.TextChoices):
        WARN = "warn", "warn only"
        STOP = "stop", "warn, then stop"

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="quota")
    gpus_total = models.PositiveIntegerField(default=0)
    cpu = models.PositiveIntegerField(default=0, help_text="CPU cores (requests) in all")
    memory_gb = models.PositiveIntegerField(default=0, help_text="memory GiB (requests) in all")
    max_workloads = models.PositiveIntegerField(default=0)
    max_runtime_minutes = models.PositiveIntegerField(default=0, help_text="0 = no limit")
    # idle culling (used by the usage issue)
    idle_threshold_percent = models.PositiveIntegerField(
        default=5, validators=[MaxValueValidator(100)])
    idle_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    idle_action = models.CharField(max_length=8, choices=IdleAction.choices,
                                   default=IdleAction.WARN)
    idle_grace_minutes = models.PositiveIntegerField(default=30)
    # an admin may set a quota above what the cluster has, on purpose (e.g. capacity on order)
    allow_over_capacity = models.BooleanField(default=False)
    # queueing on Kueue (tenants/kueue.py, workloads/queue.py): what the tenant may borrow of each GPU type beyond
    # its quota while others leave theirs idle, what it lends of its own, its fair share
    gpu_borrowing_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs of each type it may borrow; empty = no limit")
    gpu_lending_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs of each type it lends at most; empty = all idle")
    fair_share_weight = models.DecimalField(
        max_digits=6, decimal_places=2, default=1,
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text="its share of what is borrowed, against the other tenants' weights")
    # why the tenant's Kueue ClusterQueue is held (stopPolicy Hold: nothing new admitted, the
    # admitted run on), e.g. an exhausted hard budget; empty: not held
    queue_held_reason = models.TextField(blank=True, default="")
    # GPUs per type slug that the tenant's reservations running now add to the quota (the
    # calendar's beat writes it through services.quota_reserved_set; derived, never edited)
    reserved_gpus = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QuotaQuerySet.as_manager()

    def __str__(self) -> str:
        return f"quota of {self.tenant}"

    def gpus_by_type(self) -> dict[str, int]:
        """The admin's quota per GPU type (what the pages show as the quota)."""
        return {g.gpu_type.slug: g.gpus for g in self.gpu_limits.select_related("gpu_type")}

    def effective(self) -> QuotaFigures:
        """The figures admission and Kueue use now: the admin's quota plus what the tenant's
        running reservations add (`reserved_gpus`).

        A reserved GPU comes with CPU and memory: the quota's own share per GPU (its cores and
        GiB over its GPUs in all; for a quota of no GPUs, the default quota's share), rounded
        up. Reserved GPUs that could not be used for want of CPU or memory quota would be held
        for nothing."""
        reserved = {slug: int(n) for slug, n in (self.reserved_gpus or {}).items() if int(n) > 0}
        by_type = self.gpus_by_type()
        for slug, gpus in reserved.items():
            by_type[slug] = by_type.get(slug, 0) + gpus
        extra = sum(reserved.values())
        cpu, memory_gb = self.cpu, self.memory_gb
        if extra:
            if self.gpus_total:
                per_cpu, per_memory = self.cpu / self.gpus_total, self.memory_gb / self.gpus_total
            else:
                gpus = max(settings.PORTAL_DEFAULT_QUOTA_GPUS_TOTAL, 1)
                per_cpu = settings.PORTAL_DEFAULT_QUOTA_CPU / gpus
                per_memory = settings.PORTAL_DEFAULT_QUOTA_MEMORY_GB / gpus
            cpu += math.ceil(per_cpu * extra)
            memory_gb += math.ceil(per_memory * extra)
        return QuotaFigures(gpus_by_type=by_type, gpus_total=self.gpus_total + extra, cpu=cpu,
                            memory_gb=memory_gb, reserved=reserved)


@dataclasses.dataclass(frozen=True)
class QuotaFigures:
    """A quota's figures in effect now (Quota.effective): the admin's plus the reserved."""

    gpus_by_type: dict[str, int]
    gpus_total: int
    cpu: int
    memory_gb: int
    reserved: dict[str, int]  # per GPU type slug: what running reservations add

    def reserved_text(self, slug: str) -> str:
        """" (4 of them reserved)" while reservations add GPUs of the type, else ""."""
        gpus = self.reserved.get(slug, 0)
        return f" ({gpus} of them reserved)" if gpus else ""


class GpuQuota(models.Model):
    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="gpu_limits")
    gpu_type = models.ForeignKey("catalogue.GpuType", on_delete=models.CASCADE,
                                 related_name="+")
    gpus = models.PositiveIntegerField(default=0)

    objects = GpuQuotaQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["quota", "gpu_type"],
                                               name="one_limit_per_gpu_type")]

    def __str__(self) -> str:
        return f"{self.gpus} × {self.gpu_type_id}"
