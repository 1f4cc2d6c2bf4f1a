"""Tenants (Keystone projects with a namespace), their quotas, and the audit trail."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .querysets import (
    DepartmentQuerySet,
    GpuQuotaQuerySet,
    QuotaAdjustmentQuerySet,
    QuotaQuerySet,
    StorageClassQuotaQuerySet,
    TenantQuerySet,
)


class Department(models.Model):
    """Projects grouped above themselves (a faculty, an institute). Its admins are the managers
    of its own Keystone project (`keystone_project_id`): whoever holds the manager role there,
    directly or through a Keystone group, acts for the department's projects while signed in
    to it (tenants.selectors.departments_administered). `gpu_cap`: the GPUs its projects may
    hold together (GPU-equivalents; null: no cap of its own); `gpu_caps` (DepartmentGpuCap):
    the GPUs of a type they may hold together. The portal's admission enforces both where
    launches do not queue; with Kueue the department is a Cohort of its own that its projects'
    ClusterQueues borrow within (tenants/kueue.py make_department_cohort)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")
    keystone_project_id = models.CharField(
        max_length=64, blank=True, default="",
        help_text="the Keystone project whose managers are the department's admins")
    gpu_cap = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DepartmentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(
            fields=["keystone_project_id"], condition=~models.Q(keystone_project_id=""),
            name="department_keystone_project_unique")]

    def __str__(self) -> str:
        return self.name

    def gpu_caps_by_type(self) -> dict[str, int]:
        """The caps per GPU type slug, where set."""
        return {row.gpu_type.slug: row.gpus
                for row in prefetched_or(self, "gpu_caps", "gpu_type")}


class DepartmentGpuCap(models.Model):
    """The GPUs of one type a department's projects may hold together (units of the type)."""

    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="gpu_caps")
    gpu_type = models.ForeignKey("catalogue.GpuType", on_delete=models.CASCADE,
                                 related_name="+")
    gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["gpu_type__slug"]
        constraints = [models.UniqueConstraint(fields=["department", "gpu_type"],
                                               name="one_cap_per_gpu_type")]

    def __str__(self) -> str:
        return f"{self.department_id}: {self.gpus} × {self.gpu_type_id}"


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
    # the clusters its workloads may run on (none: every enabled cluster)
    clusters = models.ManyToManyField("clusters.Cluster", blank=True, related_name="+")
    delete_after = models.DateTimeField(null=True, blank=True)
    department = models.ForeignKey(Department, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="tenants")
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


class TenantCluster(models.Model):
    """A tenant's namespace on a cluster other than the home one (whose is the tenant's own
    state): how its last reconcile there found it (tenants/provisioning.py). One row per
    cluster the tenant may use; a cluster taken off the tenant's list keeps its row while the
    namespace there is being removed."""

    class State(models.TextChoices):
        NEW = "new", "new"
        PROVISIONED = "provisioned", "provisioned"
        DRIFTED = "drifted", "drifted"
        FAILED = "failed", "failed"  # the cluster refused or did not answer: the reason says
        REMOVING = "removing", "removing"  # off the tenant's list: the namespace goes there

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="cluster_states")
    # a cluster removed from the portal takes its rows (its objects stay in it)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    reason = models.TextField(blank=True, default="")
    last_reconciled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant", "cluster__name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "cluster"],
                                               name="one_state_per_tenant_and_cluster")]

    def __str__(self) -> str:
        return f"{self.tenant} on {self.cluster}: {self.state}"


class Quota(models.Model):
    """What a tenant may use at once, as the admin set it (the nominal quota). What is in force
    now also counts its adjustments (QuotaAdjustment): tenants.selectors.quota_figures answers
    both, for the portal's admission, the namespace's ResourceQuota and Kueue's ClusterQueue."""

    class IdleAction(models.TextChoices):
        WARN = "warn", "warn only"
        STOP = "stop", "warn, then stop"

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="quota")
    gpus_total = models.PositiveIntegerField(default=0)
    cpu = models.PositiveIntegerField(default=0, help_text="CPU cores (requests) in all")
    memory_gb = models.PositiveIntegerField(default=0, help_text="memory GiB (requests) in all")
    max_workloads = models.PositiveIntegerField(default=0)
    max_runtime_minutes = models.PositiveIntegerField(default=0, help_text="0 = no limit")
    # volumes (storage/): the GiB their claims ask for in all, and how many there are at once
    storage_gib = models.PositiveIntegerField(default=500, help_text="GiB of volumes in all")
    volumes = models.PositiveIntegerField(default=10, help_text="volumes at once")
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
    updated_at = models.DateTimeField(auto_now=True)

    objects = QuotaQuerySet.as_manager()

    def __str__(self) -> str:
        return f"quota of {self.tenant}"

    def gpus_by_type(self) -> dict[str, int]:
        """The admin's quota per GPU type (the nominal quota: what the quota form edits; the
        figures in force are tenants.selectors.quota_figures')."""
        return {g.gpu_type.slug: g.gpus for g in prefetched_or(self, "gpu_limits", "gpu_type")}

    def storage_by_class(self) -> dict[str, dict[str, int | None]]:
        """The admin's storage quota per storage class, where set: {class: {storage_gib,
        volumes}} (either None: not bounded within the class)."""
        return {row.storage_class: row.as_data()
                for row in prefetched_or(self, "storage_limits")}


def prefetched_or(instance: models.Model, relation: str, *related: str) -> list[Any]:
    """The rows of a many-side `relation` of `instance`: as prefetched where the caller
    prefetched them (no query), else read in one query with `related` joined."""
    manager = getattr(instance, relation)
    if relation in getattr(instance, "_prefetched_objects_cache", {}):
        return list(manager.all())
    return list(manager.select_related(*related))


class StorageClassQuota(models.Model):
    """A tenant's storage quota within one storage class, where the admin set one: GiB its
    claims of that class ask for in all, and how many (None: only the quota in all bounds
    it). The namespace's ResourceQuota carries each as `<class>.storageclass.storage.k8s.io/
    requests.storage` and `…/persistentvolumeclaims`; admission checks them in the same
    locked transaction as the quota in all (storage/services.py)."""

    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="storage_limits")
    storage_class = models.CharField(max_length=63)
    storage_gib = models.PositiveIntegerField(null=True, blank=True)
    volumes = models.PositiveIntegerField(null=True, blank=True)

    objects = StorageClassQuotaQuerySet.as_manager()

    class Meta:
        ordering = ["storage_class"]
        constraints = [models.UniqueConstraint(fields=["quota", "storage_class"],
                                               name="one_limit_per_storage_class")]

    def __str__(self) -> str:
        return f"{self.storage_class}: {self.storage_gib} GiB, {self.volumes} volumes"

    def as_data(self) -> dict[str, int | None]:
        return {"storage_gib": self.storage_gib, "volumes": self.volumes}


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


class QuotaAdjustment(models.Model):
    """A change to a tenant's quota in force that the admin's figures do not hold: GPUs a
    running reservation adds, GPUs maintenance withholds from the queue, a budget's hold of the
    queue, a grant. Each source writes only its own rows, and only through
    tenants.services.quota_adjustments_set; tenants.selectors.quota_figures adds them up."""

    class Source(models.TextChoices):
        ADMIN = "admin", "an admin"
        RESERVATION = "reservation", "a reservation"
        MAINTENANCE = "maintenance", "maintenance"
        BUDGET_HOLD = "budget_hold", "the GPU-hour budget"
        REQUEST = "request", "a quota request"

    class Kind(models.TextChoices):
        # GPUs added to the quota (> 0: with the quota's CPU and memory share per GPU) or
        # withheld from it (< 0: the type's GPUs only, never below none); of a type, or of
        # the total where no type is named
        DELTA = "delta", "GPUs added or withheld"
        HOLD = "hold", "queue held"  # Kueue admits nothing new while one is in force

    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="adjustments")
    source = models.CharField(max_length=16, choices=Source.choices)
    # what of the source it stands for (an occurrence, the windows, a budget): a writer
    # replaces all its rows at once, and the reference tells them apart in the audit trail
    ref = models.CharField(max_length=128, blank=True, default="")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.DELTA)
    gpu_type = models.ForeignKey("catalogue.GpuType", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="+")
    gpus = models.IntegerField(default=0)
    reason = models.TextField(blank=True, default="")
    # from when it counts (its writer writes it then, never ahead) to when it stops counting
    # (empty: until its writer removes it); one whose end passed counts no more, even before
    # its writer comes back to remove it
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QuotaAdjustmentQuerySet.as_manager()

    class Meta:
        ordering = ["source", "ref", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(kind="hold", gpus=0, gpu_type__isnull=True)
                           | (models.Q(kind="delta") & ~models.Q(gpus=0))),
                name="quota_adjustment_delta_or_hold"),
        ]

    def __str__(self) -> str:
        if self.kind == self.Kind.HOLD:
            return f"hold by {self.source}"
        return f"{self.gpus:+d} {self.gpu_type_id or 'GPUs'} by {self.source}"
