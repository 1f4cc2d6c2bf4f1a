"""The portal's answer while its database is away: 503 with Retry-After, never a 500 trace.

PostgreSQL restarting (or a failover) is an outage of the service, not a bug of the request:
the client should retry shortly, and the portal recovers by itself once the database is back
(CONN_HEALTH_CHECKS replaces dead connections at the next request).

API views turn database errors into 503 in `api/errors.py`. Everything else reaches Django's
500 handler, `server_error` below (registered as `handler500` in portal/urls.py): pages, and
any request whose middleware hits the database before a view runs (the session store, the
signed-in user). It is called while the exception is being handled, so it can tell.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

# what a dead or restarting database raises (connection refused, terminated, closed)
DATABASE_DOWN = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5
DATABASE_UNAVAILABLE = {
    "code": "database_unavailable",
    "detail": "The portal's database is unavailable. Retry shortly.",
    "fields": {},
}

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


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 for a request that needed the database: JSON in the API's error format under /api/,
    a short page (no template: rendering one would ask the database again) elsewhere."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(DATABASE_UNAVAILABLE, status=503)
    else:
        response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a database outage is a 503; anything else is Django's plain 500 page."""
    if isinstance(sys.exc_info()[1], DATABASE_DOWN):
        return database_unavailable_response(request)
    return defaults.server_error(request)
