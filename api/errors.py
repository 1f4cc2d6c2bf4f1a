"""One error shape for the whole API: {"code": …, "detail": …, "fields": {…}}.

DRF's views answer through `exception_handler`; what Django answers before or after a view
(an unknown path under /api/, a 500 with DEBUG off) has the same shape from `not_found` and
portal/errors.py. A body past DATA_UPLOAD_MAX_MEMORY_SIZE is 413 `request_too_large`, one
nested too deeply 400 `too_deeply_nested` (api/parsers.py).
"""

from __future__ import annotations

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


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self) -> None:
        super().__init__(f"The request body is larger than the API accepts "
                         f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes).")


class TooManyFields(exceptions.ParseError):
    default_code = "too_many_fields"
    default_detail = "The request has more form fields or files than the API accepts."


def _flatten(detail: Any) -> list[Any] | dict[str, Any]:
    if isinstance(detail, dict):
        return {key: _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [str(item) for item in detail]
        return [_flatten(item) for item in detail]
    return [str(detail)]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response: Response | None
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
        return Response({"code": "invalid", "fields": {},
                         "detail": "The input holds a value the portal cannot store or look up "
                                   "(e.g. a NUL character or a number out of range)."},
                        status=status.HTTP_400_BAD_REQUEST)
    elif isinstance(exc, DATABASE_DOWN) and is_lock_contention(exc):
        # another writer held the lock past the busy timeout and the retries: busy, not down
        # (ContentionRetryMiddleware may run the request again: the mark says it may)
        response = Response(dict(DATABASE_BUSY), status=status.HTTP_503_SERVICE_UNAVAILABLE)
        response["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
        response.lock_contention = True  # type: ignore[attr-defined]  # read with getattr
        return response
    elif isinstance(exc, DATABASE_DOWN):
        # the database is down or restarting: a clean 503, not a stack trace (other database
        # errors, such as an IntegrityError, are bugs and stay 500s)
        response = Response(dict(DATABASE_UNAVAILABLE), status=status.HTTP_503_SERVICE_UNAVAILABLE)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail: Any = exc.detail
        fields = _flatten(detail) if isinstance(detail, dict) else {}
        non_field = fields.pop("non_field_errors", None) if isinstance(fields, dict) else None
        message = "; ".join(non_field) if non_field else "Invalid input."
        if not isinstance(detail, dict):
            message = "; ".join(_flatten(detail))
        response.data = {"code": "invalid", "detail": message, "fields": fields}
        return response
    code = getattr(exc, "default_code", "error")
    if hasattr(exc, "get_codes"):
        codes = exc.get_codes()
        if isinstance(codes, str):
            code = codes
    detail = getattr(exc, "detail", str(exc))
    response.data = {"code": code, "detail": str(detail), "fields": {}}
    return response
