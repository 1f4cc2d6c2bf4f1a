"""The portal's answer while its database is away: 503 with Retry-After, never a 500 trace.

PostgreSQL restarting (or a failover) is an outage of the service, not a bug of the request:
the client should retry shortly, and the portal recovers by itself once the database is back
(CONN_HEALTH_CHECKS replaces dead connections at the next request).

API views turn database errors into 503 in `api/errors.py`. Everything else reaches Django's
500 handler, `server_error` below (registered as `handler500` in portal/urls.py): pages, and
any request whose middleware hits the database before a view runs (the session store, the
signed-in user). It is called while the exception is being handled, so it can tell.

Lock contention ("database is locked", a deadlock) is not an outage: it is waited for and
retried first (portal/contention.py), and what still ends in it is answered 503
`database_busy` with a one-second Retry-After, marked so that ContentionRetryMiddleware may run
the request again. `database_unavailable` stays for a database that is down.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from .contention import is_lock_contention

# what a dead or restarting database raises (connection refused, terminated, closed)
DATABASE_DOWN = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5
DATABASE_UNAVAILABLE = {
    "code": "database_unavailable",
    "detail": "The portal's database is unavailable. Retry shortly.",
    "fields": {},
}
DATABASE_BUSY = {
    "code": "database_busy",
    "detail": "The portal's database is busy with other writes. Retry in a moment.",
    "fields": {},
}
BUSY_RETRY_AFTER_SECONDS = 1

PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>GPU portal: temporarily unavailable</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
<h1>The portal is temporarily unavailable</h1>
<p>Its database cannot be reached at the moment. Your workloads keep running; nothing you
submitted is lost.</p>
<p>Please try again in a few seconds.</p>
</body>
</html>
"""

BUSY_PAGE = PAGE.replace(
    "Its database cannot be reached at the moment.",
    "Its database is busy with other writes at the moment.").replace(
    "in a few seconds", "in a moment")


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 for a request that needed the database: JSON in the API's error format under /api/,
    a short page (no template: rendering one would ask the database again) elsewhere."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(DATABASE_UNAVAILABLE, status=503)
    else:
        response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def database_busy_response(request: HttpRequest) -> HttpResponse:
    """503 for a request that lock contention ended (after waiting and retrying)."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(DATABASE_BUSY, status=503)
    else:
        response = HttpResponse(BUSY_PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    response.lock_contention = True  # ContentionRetryMiddleware may run it again
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: lock contention and a database outage are 503s (each its own); anything
    else is Django's plain 500 page."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_DOWN):
        if is_lock_contention(exc):
            return database_busy_response(request)
        return database_unavailable_response(request)
    return defaults.server_error(request)
