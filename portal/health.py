"""Liveness and readiness: /healthz says the process serves; /readyz that its dependencies
answer (database, Redis, Keystone, the cluster).

/healthz is answered on a thread of its own under gunicorn (portal/webserver.py), never behind
the requests that fill the others; it answers 503 when those threads have stopped getting
anything done (portal.webserver.REQUEST_THREADS). /readyz waits its turn with the other requests: a pod
too busy to take one is briefly not ready, and its checks may wait on the network.

`/readyz?checks=database,redis` asks only for the named ones. The web pods' readiness probe
uses that: without its database or Redis a pod can serve nothing, but with Keystone or the
cluster away it still serves (signed-in sessions, cached tokens, the pages with their
"cluster unreachable" banner), and since every pod shares those two, failing readiness on
them would take the whole portal out of its Service for an outage of a neighbour."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from identity.client import KeystoneClient, KeystoneError
from kube.client import cluster_probe
from portal.webserver import REQUEST_THREADS


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    stalled = REQUEST_THREADS.stalled_seconds()
    if stalled is not None:
        return JsonResponse({"status": "stalled", "detail": f"{REQUEST_THREADS.outstanding} "
                             f"requests in the request threads' hands, none done for "
                             f"{stalled:.0f} s"}, status=503)
    return JsonResponse({"status": "ok"})


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_redis() -> None:
    cache.get("readyz-probe")  # raises when Redis is down


def _check_keystone() -> None:
    KeystoneClient(timeout=2.0).check_reachable()


def _check_cluster() -> None:
    # one authenticated GET through the portal's own client and credentials (kubeconfig or
    # service account), recorded for the pages' banner: a missing namespace is still an
    # answer, an unreachable API is not
    outage = cluster_probe()
    if outage is not None:
        raise ConnectionError(outage.error)


CHECKS = {"database": _check_database, "redis": _check_redis, "keystone": _check_keystone,
          "cluster": _check_cluster}


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    names = [name for name in request.GET.get("checks", "").split(",") if name]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        return JsonResponse({"status": "invalid", "detail": f"unknown checks: {', '.join(unknown)}; "
                             f"known: {', '.join(CHECKS)}"}, status=400)
    results: dict[str, str] = {}
    for name, check in CHECKS.items():
        if names and name not in names:
            continue
        try:
            check()
            results[name] = "ok"
        except (KeystoneError, Exception) as exc:  # each dependency reports, none stops the rest
            results[name] = f"failed: {type(exc).__name__}"
    ready = all(value == "ok" for value in results.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": results},
                        status=200 if ready else 503)
