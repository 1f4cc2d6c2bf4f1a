"""Writes of the usage domain: storing samples, scraping, rollups, retention.

GPU-hours, and why they never double-count:
- allocated GPU-seconds come only from the workload's own times — overlap of
  [started_at, finished_at or now) with the bucket, × every GPU it holds (gpu_total: `gpu_count`
  on each of a distributed workload's nodes) — never from samples; a unit of a shared GPU type
  (a time-sliced replica, a MIG slice) counts its part of a GPU (the type's gpu_fraction), so
  a quarter of a T4 for an hour is a quarter of a GPU-hour, and its used seconds likewise;
- used GPU-seconds are Σ utilisation × the span each sample stands for: the time since the
  previous sample of the same device and holder, capped at `interval_cap()` (1.5 scrape
  intervals, so a gap — exporter down, missed scrapes — counts at most that), clipped to the
  workload's run and shared between minutes by overlap. A duplicate or near-duplicate sample
  stands for (almost) no time, a sample stamped outside the run (clock skew, a pod still
  reporting after its finish) for none, and used is capped by allocated in every minute; a
  sample with no utilisation (a MIG instance under the NVML agent: memory only) adds its
  memory to the rollup and nothing to used, which stays unknown rather than guessed;
- a raw sample is unique per (at, device): a re-sent batch is dropped at insert; rollup rows
  are unique per (granularity, workload, bucket) and recomputed from their sources by upsert,
  so re-running a rollup over the same range gives the same rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Model, Q, QuerySet
from django.utils import timezone

from cluster.cache import cluster_cache
from kube.client import Kube, KubeError
from workloads.models import Workload
from workloads.querysets import GPU_TOTAL

from .models import GpuDevice, GpuSample, GpuUsageRollup, ScrapeTarget
from .scrape import DeviceReading, TargetResult, discover_targets, scrape_targets

log = logging.getLogger(__name__)

_M = TypeVar("_M", bound=Model)

MINUTE = dt.timedelta(minutes=1)
TICK = dt.timedelta(microseconds=1)
HOUR = dt.timedelta(hours=1)
# `wl-<id>-…`: the workload's object name starts every pod name (workloads.naming)
POD_NAME = re.compile(r"^wl-(\d{1,18})(?:-|$)")

SAMPLE_COLUMNS = ("at", "node", "gpu_index", "uuid", "mig_instance", "workload_id", "tenant_id",
                  "namespace", "pod", "util", "memory_used_mib", "memory_total_mib",
                  "temperature", "power_w", "xid", "ecc_dbe", "scope")
# one raw sample, its values in SAMPLE_COLUMNS order
SampleRow = tuple[dt.datetime, str, int, str, str, int | None, int | None, str, str, float | None,
                  int, int, float | None, float | None, int, int, str]


def interval_cap() -> dt.timedelta:
    return dt.timedelta(seconds=1.5 * float(settings.PORTAL_USAGE_SCRAPE_INTERVAL))


# --- storing samples -------------------------------------------------------------------------

def samples_insert(*, rows: Sequence[SampleRow]) -> int:
    """Store raw samples (tuples in SAMPLE_COLUMNS order); returns how many were new.

    PostgreSQL: COPY into a temporary table, then one INSERT … SELECT … ON CONFLICT DO NOTHING
    — COPY is the fastest way in, and the INSERT drops duplicates of (at, device). Elsewhere
    (the demo's SQLite): bulk INSERT … ON CONFLICT DO NOTHING.
    """
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        objs = [GpuSample(**dict(zip(SAMPLE_COLUMNS, row, strict=True))) for row in rows]
        before = GpuSample.objects.count()
        GpuSample.objects.bulk_create(objs, batch_size=500, ignore_conflicts=True)
        return GpuSample.objects.count() - before
    table = GpuSample._meta.db_table
    columns = ", ".join(SAMPLE_COLUMNS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS usage_sample_in ("
            " at timestamptz NOT NULL, node varchar(253) NOT NULL, gpu_index smallint NOT NULL,"
            " uuid varchar(96) NOT NULL, mig_instance varchar(16) NOT NULL, workload_id bigint,"
            " tenant_id bigint, namespace varchar(63) NOT NULL, pod varchar(253) NOT NULL,"
            " util double precision, memory_used_mib integer NOT NULL,"
            " memory_total_mib integer NOT NULL, temperature double precision,"
            " power_w double precision, xid integer NOT NULL, ecc_dbe bigint NOT NULL,"
            " scope varchar(8) NOT NULL"
            ") ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY usage_sample_in ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM usage_sample_in"
                       " ON CONFLICT DO NOTHING")
        inserted: int = cursor.rowcount
        # ON COMMIT empties it, but inside an outer transaction (tests) that is later
        cursor.execute("TRUNCATE usage_sample_in")
    return max(inserted, 0)


# --- mapping pods to workloads ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Holder:
    workload_id: int
    tenant_id: int


class PodMap:
    """(namespace, pod) → the workload whose pod it is, for one scrape.

    By name first (`wl-<id>-…`); pods named otherwise are looked up among the pods labelled
    with a workload id in the cluster's read model (cluster), only when such a pod shows
    up. Either way the
    workload must belong to the tenant whose namespace the pod runs in, and the pod name must
    start with the workload's object name: a pod cannot claim another tenant's workload."""

    def __init__(self, kube: Kube | None) -> None:
        self.kube = kube
        self._labelled: dict[tuple[str, str], int] | None = None

    def _labelled_pods(self) -> dict[tuple[str, str], int]:
        if self._labelled is None:
            self._labelled = {}
            if self.kube is not None:
                try:
                    cache = cluster_cache()
                    cache.ready(cache.pods)
                    pods = cache.pods.items()
                except KubeError as exc:
                    log.warning("the pods for GPU usage are unknown: %s", exc)
                    pods = []
                for pod in pods:
                    if pod.workload_id is not None:
                        self._labelled[(pod.namespace, pod.name)] = pod.workload_id
        return self._labelled

    def resolve(self, pods: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Holder]:
        candidates: dict[tuple[str, str], int] = {}
        for namespace, pod in set(pods):
            match = POD_NAME.match(pod)
            if match:
                candidates[(namespace, pod)] = int(match.group(1))
            else:
                workload_id = self._labelled_pods().get((namespace, pod))
                if workload_id is not None:
                    candidates[(namespace, pod)] = workload_id
        if not candidates:
            return {}
        known = {row["id"]: row for row in Workload.objects.filter(
            pk__in=set(candidates.values())).values("id", "tenant_id", "tenant__namespace",
                                                    "object_name")}
        holders = {}
        for (namespace, pod), workload_id in candidates.items():
            row = known.get(workload_id)
            if row is None or row["tenant__namespace"] != namespace:
                continue
            name = row["object_name"]
            if name and pod != name and not pod.startswith(f"{name}-"):
                continue
            holders[(namespace, pod)] = Holder(workload_id, row["tenant_id"])
        return holders


# --- scraping --------------------------------------------------------------------------------

@dataclasses.dataclass
class ScrapeReport:
    targets: int = 0
    failed: int = 0
    devices: int = 0
    samples: int = 0  # new rows stored
    garbage: int = 0
    unknown_pods: int = 0
    free: int = 0  # GPUs held by no pod (stored with no workload)


def _as_int(value: float | None) -> int:
    return int(value) if value is not None else 0


def _holders_by_device(readings: list[DeviceReading], holders: dict[tuple[str, str], Holder]
                       ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every pod each device's readings name, with its own figures where it has them."""
    on: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in readings:
        if not r.pod:
            continue
        holder = holders.get((r.namespace, r.pod))
        memory = r.own_memory_used_mib
        on[r.device_key].append({
            "namespace": r.namespace, "pod": r.pod,
            "workload": holder.workload_id if holder else None, "util": r.own_util,
            "memory_used_mib": None if memory is None else int(memory), "scope": r.scope})
    for pods in on.values():
        pods.sort(key=lambda p: (p["namespace"], p["pod"]))
    return on


def _devices_upsert(readings: list[DeviceReading], holders: dict[tuple[str, str], Holder],
                    at: dt.datetime) -> None:
    """One row per device of `readings` (several readings, one per pod, on a shared GPU)."""
    on = _holders_by_device(readings, holders)
    devices = list({r.device_key: r for r in readings}.values())
    objs = []
    for r in devices:
        holder = holders.get((r.namespace, r.pod))
        objs.append(GpuDevice(
            uuid=r.uuid, mig_instance=r.mig_instance, mig_profile=r.mig_profile, node=r.node,
            index=r.index, model=r.model, memory_total_mib=r.memory_total_mib, last_seen=at,
            last_util=r.util, last_memory_used_mib=_as_int(r.memory_used_mib),
            last_temperature=r.temperature, last_power_w=r.power_w,
            last_namespace=r.namespace, last_pod=r.pod,
            last_workload_id=holder.workload_id if holder else None,
            last_holders=on.get(r.device_key, []),
            xid=_as_int(r.xid), ecc_dbe=_as_int(r.ecc_dbe)))
    GpuDevice.objects.bulk_create(
        objs, batch_size=500, update_conflicts=True, unique_fields=["uuid", "mig_instance"],
        update_fields=["mig_profile", "node", "index", "model", "memory_total_mib", "last_seen",
                       "last_util", "last_memory_used_mib", "last_temperature", "last_power_w",
                       "last_namespace", "last_pod", "last_workload", "last_holders", "xid",
                       "ecc_dbe"])


def _target_record(result: TargetResult, *, at: dt.datetime, stored: int, unknown: int) -> None:
    target, _ = ScrapeTarget.objects.get_or_create(url=result.target.url[:512],
                                                   defaults={"source": result.target.source})
    changes: dict[str, Any] = {
        "source": result.target.source, "last_scrape_at": at,
        "last_duration_ms": result.duration_ms, "scrapes_total": F("scrapes_total") + 1,
        "garbage_total": F("garbage_total") + result.garbage,
        "unknown_pods_total": F("unknown_pods_total") + unknown,
    }
    if result.ok:
        changes.update(last_success_at=at, last_error="", last_samples=stored,
                       consecutive_failures=0)
    else:
        changes.update(last_error=result.error[:2000], last_samples=0,
                       consecutive_failures=F("consecutive_failures") + 1,
                       failures_total=F("failures_total") + 1)
    ScrapeTarget.objects.filter(pk=target.pk).update(**changes)


def usage_scrape(*, kube: Kube | None = None, now: dt.datetime | None = None) -> ScrapeReport:
    """One scrape cycle: discover the exporters, read them all, store one sample per device.

    Every sample of the cycle is stamped with the cycle's time (whole seconds, the portal's
    clock), so the same device reported twice in a cycle (two exporters on a node) is one row.
    A failing target is logged and recorded on its ScrapeTarget; the others go on.
    """
    report = ScrapeReport()
    now = (now or timezone.now()).replace(microsecond=0)
    try:
        kube = kube or Kube()
        targets = discover_targets(kube)
    except KubeError as exc:
        log.warning("GPU exporters not discovered (cluster unreachable): %s", exc)
        return report
    report.targets = len(targets)
    results = scrape_targets(targets, kube=kube)
    pod_map = PodMap(kube)
    for result, evaluated_at in results:
        at = now
        if evaluated_at is not None:  # Prometheus: its evaluation time
            at = dt.datetime.fromtimestamp(int(evaluated_at), tz=dt.UTC)
        report.garbage += result.garbage
        if not result.ok:
            report.failed += 1
            _target_record(result, at=now, stored=0, unknown=0)
            continue
        readings = list({r.key: r for r in result.readings}.values())
        devices = list({r.device_key: r for r in readings}.values())
        holders = pod_map.resolve((r.namespace, r.pod) for r in readings if r.pod)
        rows: list[SampleRow] = []
        unknown = 0
        for r in readings:
            holder = holders.get((r.namespace, r.pod))
            if r.pod and holder is None:
                unknown += 1  # a pod that is no workload of the portal: device only
                continue
            if holder is None:
                report.free += 1
            rows.append((at, r.node, r.index, r.uuid, r.mig_instance,
                         holder.workload_id if holder else None,
                         holder.tenant_id if holder else None,
                         r.namespace if holder else "", r.pod if holder else "",
                         r.own_util if holder else r.util,
                         _as_int(r.own_memory_used_mib if holder else r.memory_used_mib),
                         r.memory_total_mib, r.temperature, r.power_w, _as_int(r.xid),
                         _as_int(r.ecc_dbe), r.scope if holder else ""))
        if unknown:
            log.info("GPU metrics from %s: %d GPUs held by pods the portal does not know, "
                     "skipped", result.target.url, unknown)
        if devices:
            _devices_upsert(readings, holders, at)
        stored = samples_insert(rows=rows)
        report.devices += len(devices)
        report.samples += stored
        report.unknown_pods += unknown
        _target_record(result, at=now, stored=stored, unknown=unknown)
    return report


# --- rollups ---------------------------------------------------------------------------------

def floor_minute(t: dt.datetime) -> dt.datetime:
    return t.replace(second=0, microsecond=0)


def floor_hour(t: dt.datetime) -> dt.datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def _overlap(a0: dt.datetime, a1: dt.datetime, b0: dt.datetime, b1: dt.datetime) -> float:
    return max((min(a1, b1) - max(a0, b0)).total_seconds(), 0.0)


@dataclasses.dataclass
class _Bucket:
    samples: int = 0
    util_samples: int = 0  # those with a utilisation (a MIG instance's may have memory only)
    util_sum: float = 0.0
    util_max: float | None = None
    memory_sum: float = 0.0
    memory_max: int | None = None
    used: float = 0.0
    allocated: float = 0.0

    def add(self, util: float | None, memory: int) -> None:
        self.samples += 1
        if util is not None:
            self.util_samples += 1
            self.util_sum += util
            self.util_max = util if self.util_max is None else max(self.util_max, util)
        self.memory_sum += memory
        self.memory_max = memory if self.memory_max is None else max(self.memory_max, memory)


ROLLUP_FIELDS = ["tenant", "user", "gpu_type", "cluster", "gpu_count", "samples", "util_avg",
                 "util_max", "memory_avg_mib", "memory_max_mib", "gpu_seconds_allocated",
                 "gpu_seconds_used", "updated_at"]


def _workloads_running(start: dt.datetime, end: dt.datetime, ids: set[int]
                       ) -> dict[int, dict[str, Any]]:
    """The workloads that held GPUs in [start, end), or whose samples fall there."""
    rows = Workload.objects.filter(
        Q(pk__in=ids) | (Q(started_at__lt=end) & (Q(finished_at__isnull=True)
                                                  | Q(finished_at__gt=start)))
    ).annotate(gpus=GPU_TOTAL, num=F("gpu_type__fraction_numerator"),
               den=F("gpu_type__fraction_denominator")).values(
        "id", "tenant_id", "owner_id", "gpu_type_id", "cluster", "gpus", "started_at",
        "finished_at", "num", "den")
    return {row["id"]: {**row, "share": row["num"] / row["den"] if row["num"] else 1.0}
            for row in rows}


def _upsert(granularity: str, start: dt.datetime, end: dt.datetime,
            rows: list[GpuUsageRollup]) -> int:
    with transaction.atomic():
        GpuUsageRollup.objects.bulk_create(
            rows, batch_size=1000, update_conflicts=True,
            unique_fields=["granularity", "workload", "bucket_start"], update_fields=ROLLUP_FIELDS)
        # a bucket that has nothing any more (a workload's finish moved earlier) loses its row
        keep = {(row.bucket_start, row.workload_id) for row in rows}
        existing = GpuUsageRollup.objects.filter(granularity=granularity, bucket_start__gte=start,
                                                 bucket_start__lt=end)
        stale = [pk for pk, bucket, workload_id in
                 existing.values_list("pk", "bucket_start", "workload_id").iterator()
                 if (bucket, workload_id) not in keep]
        for i in range(0, len(stale), 5000):
            GpuUsageRollup.objects.filter(pk__in=stale[i:i + 5000]).delete()
    return len(rows)


def _minute_rollup_chunk(start: dt.datetime, end: dt.datetime, now: dt.datetime) -> int:
    """Per-minute rollups of [start, end) (whole minutes) from raw samples and workload times."""
    cap = interval_cap()
    buckets: dict[tuple[int, dt.datetime], _Bucket] = defaultdict(_Bucket)
    # from one cap before (the predecessors) to one cap after (samples whose span reaches back)
    samples = (GpuSample.objects.filter(at__gte=start - cap, at__lt=end + cap)
               .order_by("uuid", "mig_instance", "at")
               .values_list("uuid", "mig_instance", "at", "workload_id", "util",
                            "memory_used_mib"))
    series = []
    for row in samples.iterator(chunk_size=20000):
        series.append(row)
    workloads = _workloads_running(start, end, {row[3] for row in series if row[3]})
    previous: tuple[str, str, dt.datetime, int | None, float | None, int] | None = None
    for row in series:
        uuid, mig, at, workload_id, util, memory = row
        prev_at, prev_workload = ((previous[2], previous[3]) if previous is not None
                                  and previous[0] == uuid and previous[1] == mig else (None, None))
        previous = row
        if workload_id is None or at < start or workload_id not in workloads:
            continue
        w = workloads[workload_id]
        if w["started_at"] is None:
            continue  # never started as far as the portal knows: nothing allocated, nothing used
        if prev_at is not None and prev_workload == workload_id:
            span_start = at - min(at - prev_at, cap)
        else:  # the first sample of this holder stands for at most one cap
            span_start = at - cap
        # the span a sample stands for, within the workload's run: samples stamped outside it
        # (clock skew, a pod still reporting after its finish) stand for nothing
        run_end = min(w["finished_at"] or now, now)
        span_start, span_end = max(span_start, w["started_at"]), min(at, run_end)
        if span_end <= span_start:
            continue
        home = floor_minute(span_end - TICK)  # the minute the sample describes
        if start <= home < end:
            buckets[(workload_id, home)].add(util, memory)
        if util is None:
            continue  # memory only: what it used of its GPU is not known, so none is counted
        bucket = floor_minute(span_start)
        while bucket < span_end:  # a span crossing a minute boundary is shared by overlap
            seconds = _overlap(span_start, span_end, bucket, bucket + MINUTE)
            if start <= bucket < end and seconds > 0:
                buckets[(workload_id, bucket)].used += util / 100.0 * seconds
            bucket += MINUTE
    del series
    for workload_id, w in workloads.items():
        if w["started_at"] is None:
            continue
        run_end = min(w["finished_at"] or now, now)
        first = max(floor_minute(w["started_at"]), start)
        bucket = first
        while bucket < end and bucket < run_end:
            seconds = _overlap(w["started_at"], run_end, bucket, bucket + MINUTE)
            if seconds > 0:
                buckets[(workload_id, bucket)].allocated = seconds * w["gpus"] * w["share"]
            bucket += MINUTE
    stamp = timezone.now()
    rows = []
    for (workload_id, bucket), b in buckets.items():
        w = workloads[workload_id]
        rows.append(GpuUsageRollup(
            granularity=GpuUsageRollup.Granularity.MINUTE, bucket_start=bucket,
            workload_id=workload_id, tenant_id=w["tenant_id"], user_id=w["owner_id"],
            gpu_type_id=w["gpu_type_id"], cluster=w["cluster"], gpu_count=w["gpus"],
            samples=b.samples,
            util_avg=b.util_sum / b.util_samples if b.util_samples else None,
            util_max=b.util_max,
            memory_avg_mib=b.memory_sum / b.samples if b.samples else None,
            memory_max_mib=b.memory_max, gpu_seconds_allocated=b.allocated,
            gpu_seconds_used=min(b.used * w["share"], b.allocated), updated_at=stamp))
    return _upsert(GpuUsageRollup.Granularity.MINUTE, start, end, rows)


def _hour_rollup(start: dt.datetime, end: dt.datetime) -> int:
    """Per-hour rollups of [start, end) (whole hours): the sums of their minute rollups."""
    sums: dict[tuple[int, dt.datetime], dict[str, Any]] = {}
    minutes = GpuUsageRollup.objects.filter(
        granularity=GpuUsageRollup.Granularity.MINUTE, bucket_start__gte=start,
        bucket_start__lt=end).values_list(
        "workload_id", "bucket_start", "tenant_id", "user_id", "gpu_type_id", "cluster",
        "gpu_count", "samples", "util_avg", "util_max", "memory_avg_mib", "memory_max_mib",
        "gpu_seconds_allocated", "gpu_seconds_used")
    for (workload_id, bucket, tenant_id, user_id, gpu_type_id, cluster, gpu_count, samples,
         util_avg, util_max, memory_avg, memory_max, allocated,
         used) in minutes.iterator(chunk_size=20000):
        key = (workload_id, floor_hour(bucket))
        s = sums.get(key)
        if s is None:
            s = sums[key] = {"tenant_id": tenant_id, "user_id": user_id,
                             "gpu_type_id": gpu_type_id, "cluster": cluster,
                             "gpu_count": gpu_count, "samples": 0,
                             "util_samples": 0, "util": 0.0, "util_max": None, "memory": 0.0, "memory_max": None,
                             "allocated": 0.0, "used": 0.0}
        s["allocated"] += allocated
        s["used"] += used
        if samples:
            s["samples"] += samples
            s["memory"] += (memory_avg or 0.0) * samples
            if util_avg is not None:  # a minute of memory only adds none to the mean
                s["util_samples"] += samples
                s["util"] += util_avg * samples
                s["util_max"] = (util_max if s["util_max"] is None
                                 else max(s["util_max"], util_max))
            s["memory_max"] = (memory_max if s["memory_max"] is None
                               else max(s["memory_max"], memory_max))
    stamp = timezone.now()
    rows = [GpuUsageRollup(
        granularity=GpuUsageRollup.Granularity.HOUR, bucket_start=bucket, workload_id=workload_id,
        tenant_id=s["tenant_id"], user_id=s["user_id"], gpu_type_id=s["gpu_type_id"],
        cluster=s["cluster"], gpu_count=s["gpu_count"], samples=s["samples"],
        util_avg=s["util"] / s["util_samples"] if s["util_samples"] else None,
        util_max=s["util_max"],
        memory_avg_mib=s["memory"] / s["samples"] if s["samples"] else None,
        memory_max_mib=s["memory_max"], gpu_seconds_allocated=s["allocated"],
        gpu_seconds_used=s["used"], updated_at=stamp)
        for (workload_id, bucket), s in sums.items()]
    return _upsert(GpuUsageRollup.Granularity.HOUR, start, end, rows)


@dataclasses.dataclass
class RollupReport:
    minute_rows: int = 0
    hour_rows: int = 0


def usage_rollup(*, since: dt.datetime, until: dt.datetime | None = None,
                 now: dt.datetime | None = None) -> RollupReport:
    """Recompute the minute rollups of [since, until) and the hour rollups of every hour that
    range touches. Idempotent: run it twice, get the same rows. Works an hour at a time, so a
    long backfill holds one hour of raw samples in memory."""
    now = now or timezone.now()
    until = min(until or now, now)
    report = RollupReport()
    start = floor_minute(since)
    end = floor_minute(until) + (MINUTE if until != floor_minute(until) else dt.timedelta())
    chunk_start = start
    while chunk_start < end:
        chunk_end = min(floor_hour(chunk_start) + HOUR, end)
        report.minute_rows += _minute_rollup_chunk(chunk_start, chunk_end, now)
        chunk_start = chunk_end
    hour = floor_hour(start)
    while hour < end:
        report.hour_rows += _hour_rollup(hour, hour + HOUR)
        hour += HOUR
    return report


# --- retention -------------------------------------------------------------------------------

@dataclasses.dataclass
class PruneReport:
    samples: int = 0
    minute_rollups: int = 0


def _delete_in_batches(queryset: QuerySet[_M], batch: int = 50000) -> int:
    deleted = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        count, _ = queryset.model._default_manager.filter(pk__in=ids).delete()
        deleted += count


def usage_prune(*, now: dt.datetime | None = None) -> PruneReport:
    """Drop raw samples older than PORTAL_USAGE_RAW_RETENTION_HOURS and minute rollups older
    than PORTAL_USAGE_MINUTE_RETENTION_DAYS; hour rollups are kept."""
    now = now or timezone.now()
    raw_cutoff = now - dt.timedelta(hours=settings.PORTAL_USAGE_RAW_RETENTION_HOURS)
    minute_cutoff = now - dt.timedelta(days=settings.PORTAL_USAGE_MINUTE_RETENTION_DAYS)
    return PruneReport(
        samples=_delete_in_batches(GpuSample.objects.filter(at__lt=raw_cutoff)),
        minute_rollups=_delete_in_batches(GpuUsageRollup.objects.filter(
            granularity=GpuUsageRollup.Granularity.MINUTE, bucket_start__lt=minute_cutoff)))
