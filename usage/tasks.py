"""Celery tasks of the usage domain: scrape (every PORTAL_USAGE_SCRAPE_INTERVAL), roll up
(every minute), prune (hourly). Each is safe to run twice and bounded in time; a failing
exporter is recorded on its ScrapeTarget and never fails the task."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.tasks import task

from .culling import idle_check
from .health import gpu_health_check
from .services import usage_prune, usage_rollup, usage_scrape

log = logging.getLogger(__name__)

SCRAPE_LOCK = "usage:scrape-lock"
ROLLUP_MARK = "usage:rollup-until"


def _cache_add(key: str, timeout: float) -> bool:
    """A best-effort lock: with Redis away, run anyway (a duplicate scrape costs nothing)."""
    try:
        return bool(cache.add(key, "1", timeout=max(int(timeout), 1)))
    except Exception as exc:  # noqa: BLE001 - any cache failure: go on without the lock
        log.warning("usage lock unavailable (%s); going on without it", exc)
        return True


@task(ignore_result=True, soft_time_limit=60, time_limit=90)
def usage_scrape_task() -> None:
    interval = float(settings.PORTAL_USAGE_SCRAPE_INTERVAL)
    # one scrape at a time across workers; the lock expires before the next beat tick
    if not _cache_add(SCRAPE_LOCK, interval * 0.8):
        log.info("a GPU usage scrape is already running; this one is skipped")
        return
    try:
        report = usage_scrape()
    finally:
        try:
            cache.delete(SCRAPE_LOCK)
        except Exception:  # noqa: BLE001, S110 - it expires by itself
            pass
    log.info("GPU usage scrape: %s", report)


@task(ignore_result=True, soft_time_limit=240, time_limit=300)
def usage_rollup_task() -> None:
    """Recompute the last PORTAL_USAGE_ROLLUP_LOOKBACK_MINUTES, or from where the last run
    finished when that is earlier (a worker was down): never further back than raw samples."""
    now = timezone.now()
    since = now - dt.timedelta(minutes=settings.PORTAL_USAGE_ROLLUP_LOOKBACK_MINUTES)
    try:
        mark = cache.get(ROLLUP_MARK)
    except Exception:  # noqa: BLE001 - no mark: the lookback alone
        mark = None
    mark_at = parse_datetime(mark) if isinstance(mark, str) else None
    if mark_at is not None:
        oldest = now - dt.timedelta(hours=settings.PORTAL_USAGE_RAW_RETENTION_HOURS)
        since = max(min(since, mark_at - dt.timedelta(minutes=1)), oldest)
    report = usage_rollup(since=since, until=now, now=now)
    try:
        cache.set(ROLLUP_MARK, now.isoformat(), timeout=None)
    except Exception:  # noqa: BLE001, S110
        pass
    log.info("GPU usage rollup from %s: %s", since, report)


@task(ignore_result=True, soft_time_limit=600, time_limit=660)
def usage_prune_task() -> None:
    log.info("GPU usage retention: %s", usage_prune())


# --- idle culling and GPU health (usage/culling.py, usage/health.py) ------------

@task(ignore_result=True, soft_time_limit=120, time_limit=150)
def usage_idle_check_task() -> None:
    """Warn idle workloads and stop those whose grace passed (per tenant's Quota settings)."""
    log.info("idle culling: %s", idle_check())


@task(ignore_result=True, soft_time_limit=60, time_limit=90)
def usage_gpu_health_task() -> None:
    """Mark GPUs degraded/lost or healthy again from the last scrapes; (un)cordon nodes."""
    report = gpu_health_check()
    if report.degraded or report.lost or report.recovered or report.cordoned \
            or report.uncordoned:
        log.warning("GPU health: %s", report)
