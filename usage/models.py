"""GPU usage: the devices the exporters report, raw samples, rollups, and scrape targets.

Shapes other features build on (idle culling, GPU health, charts) — keep them stable:

- `GpuDevice`: one row per GPU (or MIG instance) ever reported, keyed by (uuid, mig_instance);
  the scraper refreshes node/index/model/last_* on every scrape (`last_holders`: every pod on
  it, several on a time-sliced GPU) and never touches `health*`, which belong to the GPU
  health feature.
- `GpuSample`: one row per device and scrape time (at), mapped to the workload and tenant whose
  pod held the device; free GPUs are stored with workload = tenant = NULL. `util` is NULL
  where the exporter has none (a MIG instance under the NVML agent: memory only). Raw samples
  are kept PORTAL_USAGE_RAW_RETENTION_HOURS.
- `GpuUsageRollup`: per workload and minute or hour bucket; allocated GPU-seconds come from the
  workload's started/finished times × every GPU it holds (`gpu_count` on each of its `nodes`,
  also what its `gpu_count` column holds), used GPU-seconds from utilisation-weighted
  sample intervals. Rows are upserted, so re-running a rollup never double-counts.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .querysets import GpuSampleQuerySet, GpuUsageRollupQuerySet, WorkloadIdleQuerySet


class GpuDevice(models.Model):
    """A GPU (or MIG instance) as the exporters last reported it."""

    class Health(models.TextChoices):
        OK = "ok", "ok"
        DEGRADED = "degraded", "degraded"
        LOST = "lost", "lost"

    uuid = models.CharField(max_length=96, help_text="GPU-… (the parent GPU's for MIG)")
    # "" for a whole GPU; the GPU instance id (GPU_I_ID) of a MIG instance
    mig_instance = models.CharField(max_length=16, blank=True, default="")
    mig_profile = models.CharField(max_length=32, blank=True, default="")
    node = models.CharField(max_length=253, db_index=True)
    index = models.PositiveSmallIntegerField(help_text="the GPU's index on its node (label gpu)")
    model = models.CharField(max_length=128, blank=True, default="")
    memory_total_mib = models.PositiveIntegerField(default=0)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(db_index=True)
    # the last sample: what it did and who held it
    last_util = models.FloatField(null=True, blank=True)
    last_memory_used_mib = models.PositiveIntegerField(null=True, blank=True)
    last_temperature = models.FloatField(null=True, blank=True)
    last_power_w = models.FloatField(null=True, blank=True)
    last_namespace = models.CharField(max_length=63, blank=True, default="")
    last_pod = models.CharField(max_length=253, blank=True, default="")
    last_workload = models.ForeignKey("workloads.Workload", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="+")
    # every pod the last scrape found on it — a time-sliced GPU has several, which last_pod
    # (one of them) cannot say: [{namespace, pod, workload (id or null: not the portal's),
    # util (the pod's own, or the device's: scope), memory_used_mib, scope}] by pod
    last_holders = models.JSONField(default=list, blank=True)
    xid = models.PositiveIntegerField(default=0, help_text="the last XID error reported (0: none)")
    ecc_dbe = models.PositiveBigIntegerField(default=0,
                                             help_text="double-bit ECC errors (volatile total)")
    # GPU health (the health feature sets these; the scraper never does)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.OK,
                              db_index=True)
    health_reason = models.TextField(blank=True, default="")
    health_changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node", "index", "mig_instance"]
        constraints = [models.UniqueConstraint(fields=["uuid", "mig_instance"],
                                               name="usage_one_device_per_uuid")]

    def __str__(self) -> str:
        suffix = f"/mig{self.mig_instance}" if self.mig_instance else ""
        return f"{self.node}/gpu{self.index}{suffix}"


class GpuSample(models.Model):
    """One device at one scrape. `at` is the portal's scrape time (whole seconds) for exporters
    and the evaluation time for Prometheus, so the exporters' clocks never matter."""

    at = models.DateTimeField()
    node = models.CharField(max_length=253)
    gpu_index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=96)
    mig_instance = models.CharField(max_length=16, blank=True, default="")
    workload = models.ForeignKey("workloads.Workload", null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="gpu_samples")
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    namespace = models.CharField(max_length=63, blank=True, default="")
    pod = models.CharField(max_length=253, blank=True, default="")
    # None: the exporter has none for the device — a MIG instance under the NVML agent (NVML
    # has no utilisation per instance): its memory is stored, and nothing reads a figure it
    # does not have (charts say "memory only", idle culling never judges it)
    util = models.FloatField(null=True, blank=True, help_text="GPU utilisation, %")
    memory_used_mib = models.PositiveIntegerField(default=0)
    memory_total_mib = models.PositiveIntegerField(default=0)
    temperature = models.FloatField(null=True, blank=True, help_text="°C")
    power_w = models.FloatField(null=True, blank=True)
    xid = models.PositiveIntegerField(default=0)
    ecc_dbe = models.PositiveBigIntegerField(default=0)
    # On a time-sliced GPU: "process" util and memory are the pod's own (the agent's
    # per-process figures); "device" they are the whole GPU's, shared with the other pods on it
    # (charts say so; to idle culling they are an upper bound of the pod's own). "": the device
    # is this pod's alone, or free.
    scope = models.CharField(max_length=8, blank=True, default="",
                             choices=[("", "own device"), ("process", "the pod's own processes"),
                                      ("device", "device-level, shared with other pods")])

    objects = GpuSampleQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            # the same device at the same instant is one sample: a re-sent batch or a replayed
            # Prometheus answer is dropped at insert (ON CONFLICT DO NOTHING)
            # a time-sliced GPU has one sample per pod on it
            models.UniqueConstraint(fields=["at", "uuid", "mig_instance", "pod"],
                                    name="usage_one_sample_per_device_pod_and_time"),
        ]
        indexes = [
            models.Index(fields=["workload", "at"], name="usage_sample_workload_at"),
            models.Index(fields=["tenant", "at"], name="usage_sample_tenant_at"),
        ]

    def __str__(self) -> str:
        util = "no utilisation" if self.util is None else f"{self.util}%"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.node}/gpu{self.gpu_index} {util}"


class GpuUsageRollup(models.Model):
    """A workload's GPU use in one minute or one hour (bucket_start is the bucket's start)."""

    class Granularity(models.TextChoices):
        MINUTE = "minute", "minute"
        HOUR = "hour", "hour"

    granularity = models.CharField(max_length=6, choices=Granularity.choices)
    bucket_start = models.DateTimeField()
    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE,
                                 related_name="usage_rollups")
    # copied from the workload so reports group and filter without joins
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    gpu_type = models.ForeignKey("catalogue.GpuType", on_delete=models.CASCADE, related_name="+")
    # the cluster its GPUs were in (the workload's: a job dispatched to a worker is counted
    # there, not on the home cluster that queued it)
    cluster = models.CharField(max_length=40, blank=True, default="")
    gpu_count = models.PositiveIntegerField(default=0)
    samples = models.PositiveIntegerField(default=0)
    util_avg = models.FloatField(null=True, blank=True, help_text="mean over samples, %")
    util_max = models.FloatField(null=True, blank=True)
    memory_avg_mib = models.FloatField(null=True, blank=True)
    memory_max_mib = models.PositiveIntegerField(null=True, blank=True)
    gpu_seconds_allocated = models.FloatField(default=0.0)
    gpu_seconds_used = models.FloatField(default=0.0, help_text="utilisation-weighted")
    updated_at = models.DateTimeField(auto_now=True)

    objects = GpuUsageRollupQuerySet.as_manager()

    class Meta:
        ordering = ["granularity", "bucket_start", "workload_id"]
        constraints = [
            models.UniqueConstraint(fields=["granularity", "workload", "bucket_start"],
                                    name="usage_one_rollup_per_workload_and_bucket"),
        ]
        indexes = [
            models.Index(fields=["tenant", "granularity", "bucket_start"],
                         name="usage_rollup_tenant_bucket"),
            models.Index(fields=["granularity", "bucket_start"], name="usage_rollup_bucket"),
        ]

    def __str__(self) -> str:
        return f"{self.granularity} {self.bucket_start:%Y-%m-%d %H:%M} workload {self.workload_id}"


class ScrapeTarget(models.Model):
    """An exporter (or Prometheus) the scraper reads, and how its last scrapes went."""

    class Source(models.TextChoices):
        PROMETHEUS = "prometheus", "Prometheus (PromQL)"
        EXPORTER = "exporter", "exporter Service endpoint"
        KUBESIM = "kubesim", "the cluster API server's /metrics (kubesim)"

    url = models.CharField(max_length=512, unique=True)
    source = models.CharField(max_length=12, choices=Source.choices)
    last_scrape_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_duration_ms = models.PositiveIntegerField(default=0)
    last_samples = models.PositiveIntegerField(default=0)
    consecutive_failures = models.PositiveIntegerField(default=0)
    # running totals of what was skipped
    scrapes_total = models.PositiveBigIntegerField(default=0)
    failures_total = models.PositiveBigIntegerField(default=0)
    garbage_total = models.PositiveBigIntegerField(default=0,
                                                   help_text="series or payloads not understood")
    unknown_pods_total = models.PositiveBigIntegerField(
        default=0, help_text="GPUs held by pods that are no workload of the portal")

    class Meta:
        ordering = ["url"]

    def __str__(self) -> str:
        return self.url


class WorkloadIdle(models.Model):
    """Idle culling's state of one workload (usage/culling.py), made when first needed:
    the admin's exemption, the warning in force, and the last "I still need it"."""

    workload = models.OneToOneField("workloads.Workload", on_delete=models.CASCADE,
                                    primary_key=True, related_name="idle")
    cull_exempt = models.BooleanField(default=False,
                                      help_text="an admin exempted it: never warned or stopped")
    exempt_note = models.CharField(max_length=200, blank=True, default="")
    # the warning in force (None: none); stop_at only when the tenant's action is "stop"
    warned_at = models.DateTimeField(null=True, blank=True, db_index=True)
    warned_util_max = models.FloatField(null=True, blank=True,
                                        help_text="the highest utilisation of the idle window, %")
    stop_at = models.DateTimeField(null=True, blank=True)
    # "I still need it": the idle window starts again from here
    extended_at = models.DateTimeField(null=True, blank=True)
    extended_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    warnings = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkloadIdleQuerySet.as_manager()

    def __str__(self) -> str:
        return f"idle state of workload {self.workload_id}"

    @property
    def warned(self) -> bool:
        return self.warned_at is not None
