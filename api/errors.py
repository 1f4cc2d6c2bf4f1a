"""One error shape for the whole API: {"code", "category", "detail", "fields"}.

DRF's views answer through `exception_handler`; what Django answers before or after a view
(an unknown path under /api/, a 500 with DEBUG off) has the same shape from `error_body`
(api/views.py, portal/errors.py). A body past DATA_UPLOAD_MAX_MEMORY_SIZE is 413
`request_too_large`, one nested too deeply 400 `too_deeply_nested` (api/parsers.py).

`code` says exactly what happened and may grow; `category` is one of the few CATEGORIES, what
a client decides on (gpuctl's exit codes): derived here, from the exception's own `category`
where it declares one (an admission refusal is 403 but `admission`, not `forbidden`), else
from the status.

An error echoes at most an excerpt of what was sent: every message is cut to MAX_TEXT
characters, a field's list of messages (a list field's errors per item) to MAX_ITEMS, the
fields to MAX_FIELDS_CHARS in all, so that a large bad body is not answered larger still.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import DataError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.contention import is_lock_contention
from core.outages import (
    BUSY_RETRY_AFTER_SECONDS,
    DATABASE_BUSY,
    DATABASE_DOWN,
    DATABASE_UNAVAILABLE,
    RETRY_AFTER_SECONDS,
)
from core.validation import excerpt


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self) -> None:
        super().__init__(f"The request body is larger than the API accepts "
                         f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes).")


class TooManyFields(exceptions.ParseError):
    default_code = "too_many_fields"
    default_detail = "The request has more form fields or files than the API accepts."


class Category(StrEnum):
    INVALID = "invalid"  # the request itself is wrong (400, 405, 406, 413, 415, 422): fix it
    AUTH = "auth"  # no token, or one Keystone no longer accepts (401)
    FORBIDDEN = "forbidden"  # the caller's role does not allow it (403)
    NOT_FOUND = "not_found"  # nothing there that the caller may see (404)
    CONFLICT = "conflict"  # the object's state refuses it now (409, 412)
    ADMISSION = "admission"  # a launch over a limit: quota, budget, maintenance, addresses
    RATE_LIMITED = "rate_limited"  # too many requests: retry after Retry-After (429)
    UNAVAILABLE = "unavailable"  # the portal, its database or the cluster: retry later (503)
    INTERNAL = "internal"  # the portal failed (500): the error is logged


CATEGORIES = [category.value for category in Category]

_BY_STATUS = {400: Category.INVALID, 401: Category.AUTH, 403: Category.FORBIDDEN,
              404: Category.NOT_FOUND, 405: Category.INVALID, 406: Category.INVALID,
              409: Category.CONFLICT, 410: Category.NOT_FOUND, 412: Category.CONFLICT,
              413: Category.INVALID, 415: Category.INVALID, 422: Category.INVALID,
              429: Category.RATE_LIMITED}

MAX_TEXT = 300  # characters of one message (or of detail: MAX_DETAIL)
MAX_DETAIL = 1000
MAX_ITEMS = 10  # fields, or messages of one field
MAX_FIELDS_CHARS = 8000  # all of `fields`, as JSON
# how deep messages are shown as they nest: fields → a list of objects (mounts) → its item →
# that item's field → its messages; deeper, one text
MAX_DEPTH = 5
MORE = "…"  # the key, or the last message, that says how much was left out


def category_for(status_code: int, exc: Exception | None = None) -> str:
    """The category of an error: the one its exception declares, else its status's."""
    declared = getattr(exc, "category", None)
    if declared in CATEGORIES:
        return str(declared)
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code].value
    if status_code >= 500:
        return (Category.INTERNAL if status_code == 500 else Category.UNAVAILABLE).value
    return Category.INVALID.value


def _bounded(value: Any, depth: int = 0) -> Any:
    """Messages (a dict or list of them, nested as DRF nests a list field's) cut to size."""
    if depth < MAX_DEPTH and isinstance(value, dict):
        shown = {excerpt(str(key), 80, quotes=False): _bounded(item, depth + 1)
                 for key, item in list(value.items())[:MAX_ITEMS]}
        if len(value) > MAX_ITEMS:
            shown[MORE] = [f"{len(value) - MAX_ITEMS} more not shown"]
        return shown
    if depth < MAX_DEPTH and isinstance(value, list):
        items = [_bounded(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"{MORE} {len(value) - MAX_ITEMS} more not shown")
        return items
    return excerpt(str(value), MAX_TEXT, quotes=False)


def _bounded_fields(fields: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    bounded = _bounded(fields)
    for key, value in bounded.items():
        if len(json.dumps({**shown, key: value})) > MAX_FIELDS_CHARS:
            shown[MORE] = [f"{len(bounded) - len(shown)} more not shown"]
            break
        shown[key] = value
    return shown


def error_body(code: str, detail: str, *, status: int, fields: dict[str, Any] | None = None,
               exc: Exception | None = None) -> dict[str, Any]:
    """The body of every API error: {code, category, detail, fields}, each bounded."""
    return {"code": code, "category": category_for(status, exc),
            "detail": excerpt(str(detail), MAX_DETAIL, quotes=False),
            "fields": _bounded_fields(fields or {})}


def _flatten(detail: Any) -> list[Any] | dict[str, Any]:
    if isinstance(detail, dict):
        return {key: _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [str(item) for item in detail]
        return [_flatten(item) for item in detail]
    return [str(detail)]


def _as_json(context: dict[str, Any]) -> None:
    """An error is JSON (or the browsable page), also where the request asked for another
    format: a usage report's `?format=csv` that fails is answered in the error shape."""
    request = context.get("request")
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is not None and renderer.media_type not in ("application/json", "text/html"):
        request.accepted_renderer = JSONRenderer()  # type: ignore[union-attr]
        request.accepted_media_type = JSONRenderer.media_type  # type: ignore[union-attr]


def _outage(body: dict[str, Any], retry_after: int) -> Response:
    response = Response(error_body(body["code"], body["detail"], status=503),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE)
    response["Retry-After"] = str(retry_after)
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response: Response | None
    _as_json(context)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()
    elif isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        exc = TooManyFields()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DataError):
        # the database refused a value that got past validation (a NUL character, a number out
        # of range): the caller's input, so 400, not "database unavailable"
        return Response(error_body("invalid", "The input holds a value the portal cannot store "
                                              "or look up (e.g. a NUL character or a number "
                                              "out of range).", status=400),
                        status=status.HTTP_400_BAD_REQUEST)
    elif isinstance(exc, DATABASE_DOWN) and is_lock_contention(exc):
        # another writer held the lock past the busy timeout and the retries: busy, not down
        # (ContentionRetryMiddleware may run the request again: the mark says it may)
        response = _outage(DATABASE_BUSY, BUSY_RETRY_AFTER_SECONDS)
        response.lock_contention = True  # type: ignore[attr-defined]  # read with getattr
        return response
    elif isinstance(exc, DATABASE_DOWN):
        # the database is down or restarting: a clean 503, not a stack trace (other database
        # errors, such as an IntegrityError, are bugs and stay 500s)
        return _outage(DATABASE_UNAVAILABLE, RETRY_AFTER_SECONDS)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail: Any = exc.detail
        fields = _flatten(detail) if isinstance(detail, dict) else {}
        non_field = fields.pop("non_field_errors", None) if isinstance(fields, dict) else None
        message = "; ".join(non_field[:MAX_ITEMS]) if non_field else "Invalid input."
        if not isinstance(detail, dict):
            message = "; ".join(str(item) for item in list(_flatten(detail))[:MAX_ITEMS])
        response.data = error_body("invalid", message, status=response.status_code,
                                   fields=fields if isinstance(fields, dict) else {}, exc=exc)
        return response
    code = getattr(exc, "default_code", "error")
    if hasattr(exc, "get_codes"):
        codes = exc.get_codes()
        if isinstance(codes, str):
            code = codes
    response.data = error_body(code, str(getattr(exc, "detail", exc)),
                               status=response.status_code, exc=exc)
    return response
