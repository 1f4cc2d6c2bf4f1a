"""The portal's answer while its database is away: 503 with Retry-After, never a 500 trace.

PostgreSQL restarting (or a failover) is an outage of the service, not a bug of the request:
the client should retry shortly, and the portal recovers by itself once the database is back
(CONN_HEALTH_CHECKS replaces dead connections at the next request).

API views turn database errors into 503 in `api/errors.py`. Everything else reaches Django's
500 handler, `server_error` below (registered as `handler500` in portal/urls.py): pages, and
any request whose middleware hits the database before a view runs (the session store, the
signed-in user). It is called while the exception is being handled, so it can tell.

Lock contention ("database is locked", a deadlock) is not an outage: it is waited for and
retried first (core/contention.py), and what still ends in it is answered 503
`database_busy` with a one-second Retry-After, marked so that ContentionRetryMiddleware may run
the request again. `database_unavailable` stays for a database that is down.

Under /api/ every answer of these handlers is JSON in the API's format ({code, category, detail,
fields}: api/errors.py's error_body); a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE is 413, not
Django's 400. None of them shows anything of the request (error reports are
portal/error_reports.py's).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from api.errors import error_body
from core.contention import is_lock_contention
from core.outages import (
    BUSY_RETRY_AFTER_SECONDS,
    DATABASE_BUSY,
    DATABASE_DOWN,
    DATABASE_UNAVAILABLE,
    RETRY_AFTER_SECONDS,
)

PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>GPU portal: temporarily unavailable</title></head>
<body>
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


def _outage_body(body: Mapping[str, object]) -> dict[str, object]:
    return error_body(str(body["code"]), str(body["detail"]), status=503)


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 for a request that needed the database: JSON in the API's error format under /api/,
    a short page (no template: rendering one would ask the database again) elsewhere."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(_outage_body(DATABASE_UNAVAILABLE), status=503)
    else:
        response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def database_busy_response(request: HttpRequest) -> HttpResponse:
    """503 for a request that lock contention ended (after waiting and retrying)."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(_outage_body(DATABASE_BUSY), status=503)
    else:
        response = HttpResponse(BUSY_PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    response.lock_contention = True  # type: ignore[attr-defined]  # ContentionRetryMiddleware may run it again
    return response


SERVER_ERROR = error_body("server_error", "The portal failed to answer this request; the error "
                                          "is logged.", status=500)
REQUEST_TOO_LARGE_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>GPU portal: request too large</title></head>
<body>
<h1>The request is too large</h1>
<p>The form sent more data than the portal accepts. Go back, shorten it and send it again.</p>
</body>
</html>
"""


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _api_error(code: str, detail: str, status: int) -> JsonResponse:
    return JsonResponse(error_body(code, detail, status=status), status=status)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: lock contention and a database outage are 503s (each its own); anything
    else is a 500: JSON in the API's format under /api/, Django's plain page elsewhere."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_DOWN):
        if is_lock_contention(exc):
            return database_busy_response(request)
        return database_unavailable_response(request)
    if _is_api(request):
        return JsonResponse(SERVER_ERROR, status=500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400 (a request Django refused before a view answered): a body past
    DATA_UPLOAD_MAX_MEMORY_SIZE is 413; JSON under /api/."""
    if isinstance(exception, RequestDataTooBig):
        if _is_api(request):
            return _api_error("request_too_large", "The request body is larger than the API "
                              f"accepts ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes).", 413)
        return HttpResponse(REQUEST_TOO_LARGE_PAGE, status=413,
                            content_type="text/html; charset=utf-8")
    if _is_api(request):
        return _api_error("bad_request", "The request is malformed.", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler403: JSON under /api/ (DRF's views answer their own 403s)."""
    if _is_api(request):
        return _api_error("permission_denied",
                          "You do not have permission to perform this action.", 403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: JSON under /api/ (api/urls.py answers unknown API paths itself, so that
    they get JSON with DEBUG on as well)."""
    if _is_api(request):
        return _api_error("not_found", "Not found.", 404)
    return defaults.page_not_found(request, exception)
