"""Volumes: a tenant's PersistentVolumeClaims as the portal's own objects, the storage classes
an admin offers for them, and the read-only datasets an admin publishes to projects."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from tenants.models import Tenant

from .querysets import (
    PROJECT,
    USER,
    DatasetQuerySet,
    StorageClassQuerySet,
    VolumeQuerySet,
    VolumeSizeQuerySet,
)

NAME_MAX_LENGTH = 63
DATASET_NAME_MAX_LENGTH = 40  # a DNS label, and room for it in a variable's name
DATASET_MOUNT_ROOT = "/datasets"


class StorageClass(models.Model):
    """A StorageClass of the cluster that the portal offers for volumes, as its admin
    describes it ("fast SSD", "large Lustre"). `name` is the cluster's name for it, checked
    against the cluster when the admin adds it; `expandable`: volumes of it may grow in place
    (the cluster's allowVolumeExpansion, which the admin may only narrow)."""

    name = models.CharField(max_length=253, unique=True)
    description = models.CharField(max_length=200, blank=True)
    expandable = models.BooleanField(default=False)
    is_default = models.BooleanField(default=False, help_text="a volume that names no class "
                                                              "gets this one")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StorageClassQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True),
                                               name="one_default_storage_class")]

    def __str__(self) -> str:
        return self.name


class Volume(models.Model):
    """A volume of a tenant: a PersistentVolumeClaim named `claim_name` in its namespace. A
    user volume is its owner's; a project volume every member's (`owner` records who made
    it). `state` follows the claim as the tracker sees it: pending until bound, failed when
    the provisioner says it cannot make it (its words in `reason`)."""

    class Scope(models.TextChoices):
        USER = USER, "user"
        PROJECT = PROJECT, "project"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        BOUND = "bound", "bound"
        FAILED = "failed", "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="volumes")
    scope = models.CharField(max_length=8, choices=Scope.choices)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="volumes")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    size_gib = models.PositiveIntegerField()
    # the cluster's StorageClass name; empty: the cluster's default class
    storage_class = models.CharField(max_length=253, blank=True)
    claim_name = models.CharField(max_length=63, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    reason = models.TextField(blank=True)
    # the size the claim had when last seen bound (GiB; 0: not yet)
    capacity_gib = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # set when it is deleted: its claim is deleted by a task, then the row
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = VolumeQuerySet.as_manager()

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"],
                                    condition=Q(scope=PROJECT, deleted_at__isnull=True),
                                    name="one_project_volume_per_name"),
            models.UniqueConstraint(fields=["tenant", "owner", "name"],
                                    condition=Q(scope=USER, deleted_at__isnull=True),
                                    name="one_user_volume_per_name"),
            models.UniqueConstraint(fields=["tenant", "claim_name"],
                                    condition=~Q(claim_name="") & Q(deleted_at__isnull=True),
                                    name="one_volume_per_claim"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"

    @property
    def mountable(self) -> bool:
        """A workload may mount it: bound, or on its way (the pod waits for the claim)."""
        return self.deleted_at is None and self.state != self.State.FAILED


class VolumeSize(models.Model):
    """What a volume held from `since` until its next row (or now): the record the usage report
    counts GiB-days from, as GPU-hours from rollups. A volume holds storage from the moment its
    claim is first seen bound (a claim that never binds, pending or failed, holds none), so
    the first row is written then, at the size it has; a grow writes the new size and a
    delete a 0, each in the transaction that changes the volume. The volume's own row is
    deleted with its claim: these rows name it by id, not by a key, and stay, so past periods
    keep counting it; tenant and owner are copied for the report's grouping."""

    volume_id = models.BigIntegerField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="+")
    scope = models.CharField(max_length=8, choices=Volume.Scope.choices)
    size_gib = models.PositiveIntegerField()  # 0: deleted
    since = models.DateTimeField()

    objects = VolumeSizeQuerySet.as_manager()

    class Meta:
        ordering = ["volume_id", "since", "pk"]
        indexes = [models.Index(fields=["tenant", "since"], name="volumesize_tenant_since"),
                   models.Index(fields=["volume_id", "since"], name="volumesize_volume_since")]

    def __str__(self) -> str:
        return f"volume {self.volume_id}: {self.size_gib} GiB from {self.since:%Y-%m-%d %H:%M}"


class Dataset(models.Model):
    """Read-only data an admin publishes to every project or to named ones: an existing
    PersistentVolume, an NFS export (Lustre's too, where it is served over NFS), a CSI
    volume, or an S3 bucket and prefix. `source` holds the kind's parameters as the admin gave
    them (storage/validation.py; a PersistentVolume's: its name and the source copied from
    it). A project's workloads reach it through a PersistentVolume and claim of its own, made
    the first time one of them mounts it (storage/manifests.py)."""

    class Kind(models.TextChoices):
        PV = "pv", "an existing PersistentVolume"
        NFS = "nfs", "an NFS export"
        CSI = "csi", "a CSI volume"
        S3 = "s3", "an S3 bucket"

    name = models.CharField(max_length=DATASET_NAME_MAX_LENGTH, unique=True)
    description = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=4, choices=Kind.choices)
    size_gib = models.PositiveIntegerField()
    source = models.JSONField(default=dict)
    open_to_all = models.BooleanField(default=False)
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="datasets")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def default_path(self) -> str:
        """Where a launch that names no path mounts it."""
        return f"{DATASET_MOUNT_ROOT}/{self.name}"

    def is_open_to(self, tenant: Tenant) -> bool:
        return self.open_to_all or self.tenants.filter(pk=tenant.pk).exists()
