"""Reads for the GPU charts: one workload's utilisation and memory over time.

The series come from where the time range is kept at its best resolution: raw samples (one
point per scrape, its GPUs averaged) up to RAW_UP_TO, per-minute rollups up to MINUTE_UP_TO,
per-hour rollups beyond. Raw samples are only kept PORTAL_USAGE_RAW_RETENTION_HOURS, so an
older range uses the rollups whatever its length.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db.models import Avg, Count, Max, Sum
from django.utils import timezone

from core.validation import as_whole
from kube.labels import pod_name_rank
from workloads.models import Workload

from .models import GpuSample, GpuUsageRollup

WINDOWS_MINUTES = (15, 60, 360, 1440, 10080)  # the ranges the page offers
DEFAULT_WINDOW_MINUTES = 60
RAW_UP_TO = dt.timedelta(hours=6)
MINUTE_UP_TO = dt.timedelta(days=2)


DEVICE_LEVEL_NOTE = ("device-level: shared with other pods (the figures are the whole GPU's, "
                     "not this workload's own)")
MEMORY_ONLY_NOTE = ("no utilisation per MIG slice: memory only (the GPU's exporter has no "
                    "utilisation per MIG instance; idle culling does not judge this workload)")


def _round(value: float | None, places: int = 1) -> float | None:
    return None if value is None else round(value, places)


def chart_window(value: str | None) -> int:
    """The `minutes` query parameter, one of WINDOWS_MINUTES (anything else: the default)."""
    minutes = as_whole(value or DEFAULT_WINDOW_MINUTES)
    return minutes if minutes in WINDOWS_MINUTES else DEFAULT_WINDOW_MINUTES


def _epoch(t: dt.datetime) -> int:
    return int(t.timestamp())


def rank_gpu_series(workload: Workload, start: dt.datetime, end: dt.datetime
                    ) -> dict[str, Any]:
    """A distributed workload's GPU samples in [start, end) per rank (the pod that held the
    GPU names it): {"ranks": [{rank, t, util_avg, util_max, memory_used_mib}] by rank, "sum":
    {t, gpus_busy (Σ utilisation over every GPU of every rank, in GPUs), memory_used_mib (Σ),
    gpus (how many GPUs reported)}}."""
    rows = (GpuSample.objects.filter(workload_id=workload.pk, at__gte=start, at__lte=end)
            .values("at", "pod").annotate(mean=Avg("util"), peak=Max("util"),
                                          mem=Avg("memory_used_mib"), busy=Sum("util"),
                                          mem_sum=Sum("memory_used_mib"), gpus=Count("id"))
            .order_by("at", "pod"))
    per_rank: dict[int, dict[str, list[float | None]]] = {}
    totals: dict[int, list[float]] = {}
    for row in rows:
        at = _epoch(row["at"])
        total = totals.setdefault(at, [0.0, 0.0, 0])
        total[0] += (row["busy"] or 0.0) / 100.0
        total[1] += row["mem_sum"]
        total[2] += row["gpus"]
        rank = pod_name_rank(workload.object_name, row["pod"])
        if not isinstance(rank, int):
            continue  # not a rank's GPU (an MPI launcher holds none)
        series = per_rank.setdefault(rank, {"t": [], "util_avg": [], "util_max": [],
                                            "memory_used_mib": []})
        series["t"].append(at)
        series["util_avg"].append(_round(row["mean"]))
        series["util_max"].append(_round(row["peak"]))
        series["memory_used_mib"].append(_round(row["mem"]))
    times = sorted(totals)
    return {
        "ranks": [{"rank": rank, **series} for rank, series in sorted(per_rank.items())],
        "sum": {"t": times, "gpus_busy": [round(totals[t][0], 2) for t in times],
                "memory_used_mib": [totals[t][1] for t in times],
                "gpus": [totals[t][2] for t in times]},
    }


def workload_gpu_series(workload: Workload, *, minutes: int = DEFAULT_WINDOW_MINUTES,
                        now: dt.datetime | None = None) -> dict[str, Any]:
    """The chart's JSON: times (epoch seconds), mean and peak utilisation (%) and mean memory
    used per GPU (MiB) over the last `minutes` of the workload's run."""
    now = now or timezone.now()
    end = min(workload.finished_at or now, now)
    start = end - dt.timedelta(minutes=minutes)
    raw_since = now - dt.timedelta(hours=settings.PORTAL_USAGE_RAW_RETENTION_HOURS)
    t: list[int] = []
    util_avg: list[float | None] = []
    util_max: list[float | None] = []
    memory: list[float | None] = []
    memory_total = None
    if end - start <= RAW_UP_TO and start >= raw_since:
        source = "samples"
        rows = (GpuSample.objects.filter(workload_id=workload.pk, at__gte=start, at__lte=end)
                .values("at").annotate(mean=Avg("util"), peak=Max("util"),
                                       mem=Avg("memory_used_mib"), total=Max("memory_total_mib"))
                .order_by("at"))
        for row in rows:
            t.append(_epoch(row["at"]))
            util_avg.append(_round(row["mean"]))  # None: memory only (a MIG slice)
            util_max.append(_round(row["peak"]))
            memory.append(_round(row["mem"]))
            memory_total = max(memory_total or 0, row["total"] or 0) or None
    else:
        granularity = (GpuUsageRollup.Granularity.MINUTE if end - start <= MINUTE_UP_TO
                       else GpuUsageRollup.Granularity.HOUR)
        source = f"{granularity} rollups"
        rollups = (GpuUsageRollup.objects.filter(workload_id=workload.pk,
                                                 granularity=granularity,
                                                 bucket_start__gte=start, bucket_start__lt=end,
                                                 samples__gt=0)
                   .order_by("bucket_start")
                   .values_list("bucket_start", "util_avg", "util_max", "memory_avg_mib"))
        for bucket, avg, peak, mem in rollups:
            t.append(_epoch(bucket))
            util_avg.append(None if avg is None else round(avg, 1))
            util_max.append(peak)
            memory.append(None if mem is None else round(mem, 1))
        memory_total = GpuSample.objects.filter(workload_id=workload.pk).aggregate(
            m=Max("memory_total_mib"))["m"]
    if not memory_total and workload.gpu_type.memory_gb:
        memory_total = workload.gpu_type.memory_gb * 1024
    # On a time-sliced GPU without per-process figures the samples are the whole GPU's: the
    # chart must not pass them off as the workload's own.
    in_range = {"at__gte": start, "at__lte": end} if source == "samples" else {}
    device_level = GpuSample.objects.filter(workload_id=workload.pk, scope="device",
                                            **in_range).exists()
    # A MIG instance under the NVML agent has memory and no utilisation: the chart says so
    # rather than drawing an empty utilisation as an idle one.
    memory_only = bool(t) and all(value is None for value in util_avg)
    running = workload.state == Workload.State.RUNNING
    ranks = (rank_gpu_series(workload, start, end)
             if workload.distributed and source == "samples" else None)
    return {
        "workload": workload.pk, "state": workload.state, "gpu_count": workload.gpu_count,
        "nodes": workload.nodes, "gpu_total": workload.gpu_total,
        # a distributed workload's: per rank, and the group's sums (raw samples only: the
        # rollups are per workload)
        **(ranks or {}),
        "source": source, "minutes": minutes, "from": _epoch(start), "to": _epoch(end),
        "t": t, "util_avg": util_avg, "util_max": util_max, "memory_used_mib": memory,
        "memory_total_mib": memory_total,
        "device_level": device_level, "memory_only": memory_only,
        "scope_note": (DEVICE_LEVEL_NOTE if device_level else
                       MEMORY_ONLY_NOTE if memory_only else ""),
        # while it runs, the page asks again after one scrape interval
        "refresh_seconds": float(settings.PORTAL_USAGE_SCRAPE_INTERVAL) if running else None,
    }
