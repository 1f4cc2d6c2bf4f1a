"""The portal's own Prometheus metrics, served at /metrics.

- `portal_http_requests_total{method,route,status}` and
  `portal_http_request_duration_seconds{method,route}`: every request, by its URL pattern's
  name (`api:workload-detail`), never by its raw path, so cardinality stays bounded;
- `portal_workload_launches_total{template,gpu_type}` and
  `portal_admission_refusals_total{gpu_type}`: admission decisions (workloads.services);
- `portal_celery_task_failures_total{task}`: failed Celery tasks, counted in Redis because they
  happen in worker processes, on other hosts, that this endpoint cannot see;
- `portal_keystone_token_cache_total{result}` (identity.tokens) and the process
  metrics of prometheus_client.

Under gunicorn with several worker processes, set PROMETHEUS_MULTIPROC_DIR (an empty folder
per start, shared by the processes of one pod): each process then writes its samples there and
/metrics sums them, as prometheus_client's multiprocess mode documents.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from django.core.cache.backends.redis import RedisCacheClient
    from redis import Redis

log = logging.getLogger(__name__)

HTTP_REQUESTS = Counter("portal_http_requests_total", "HTTP requests served, by route and status",
                        ["method", "route", "status"])
HTTP_LATENCY = Histogram("portal_http_request_duration_seconds",
                         "Time to serve an HTTP request, by route", ["method", "route"],
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))

TASK_FAILURES_KEY = "metrics:celery-task-failures"
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return match.view_name or match.route or "unnamed"


class PrometheusMiddleware:
    """Counts and times every request; put it first so its time includes the whole stack."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in _METHODS else "other"
        route = _route(request)
        HTTP_LATENCY.labels(method, route).observe(time.perf_counter() - started)
        HTTP_REQUESTS.labels(method, route, str(response.status_code)).inc()
        return response


# --- Celery task failures: counted in Redis, read back by /metrics --------------------------

def _redis() -> Redis:
    from django.core.cache import cache

    # Django's RedisCache keeps its client private, and the stubs leave it out
    client: RedisCacheClient = cache._cache  # type: ignore[attr-defined]
    return client.get_client(write=True)  # the django-redis-compatible raw client


def _cache_key() -> str:
    from django.core.cache import cache

    return cache.make_key(TASK_FAILURES_KEY)


def task_failed(sender: object = None, **kwargs: Any) -> None:
    """Celery `task_failure` handler (connected in PortalConfig.ready)."""
    name = getattr(sender, "name", None) or "unknown"
    try:
        _redis().hincrby(_cache_key(), name, 1)
    except Exception:  # counting must never make a failure worse
        log.warning("could not count a task failure", exc_info=True)


class TaskFailureCollector(Collector):
    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily("portal_celery_task_failures",
                                   "Celery tasks that raised, by task (all workers)",
                                   labels=["task"])

    def describe(self) -> Iterator[CounterMetricFamily]:
        # what registration asks for: the names only, without a round trip to Redis
        yield self._family()

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = self._family()
        try:
            counts = _redis().hgetall(_cache_key())
        except Exception:
            log.warning("task failure counts unavailable", exc_info=True)
            counts = {}
        for name, value in sorted(counts.items()):
            family.add_metric([name.decode() if isinstance(name, bytes) else name], int(value))
        yield family


_task_failures = TaskFailureCollector()
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    REGISTRY.register(_task_failures)


def registry() -> CollectorRegistry:
    """The registry to expose: this process's, or every process's in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined)
        combined.register(_task_failures)
        return combined
    return REGISTRY


@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
