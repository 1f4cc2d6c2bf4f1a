"""Lock contention is not an outage: it is waited for and retried, never answered as
`database_unavailable`.

Contention is a writer that had to give way to another: SQLite's "database is locked" (the
busy timeout ran out: portal/database.py makes it wait first), PostgreSQL's deadlock,
serialisation failure or lock timeout. The database is up; the same work done again a moment
later succeeds. So:

- `retry_on_contention(fn)` runs a unit of work (a whole transaction: not inside another
  atomic block, whose transaction would be broken) again, with a short backoff, when
  contention ends it. The tracker writes through it, so a lock never costs it a cycle.
- `ContentionRetryMiddleware` runs a whole request again when contention ended it before it
  had written anything (a request that wrote before may have committed part of its work, so it
  is answered as it is). The request body is read first, so the retry sees it again.
- What still ends in contention is answered 503 `database_busy` with a short Retry-After
  (portal/errors.py), not `database_unavailable`, which stays for a database that is down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest
from django.http.response import HttpResponseBase

log = logging.getLogger(__name__)

T = TypeVar("T")

# SQLite's messages for a lock held by another connection (SQLITE_BUSY / SQLITE_LOCKED)
SQLITE_CONTENTION = ("database is locked", "database table is locked",
                     "database schema is locked")
# PostgreSQL's SQLSTATEs: serialization_failure, deadlock_detected, lock_not_available
POSTGRES_CONTENTION = {"40001", "40P01", "55P03"}
ATTEMPTS = 4
FIRST_BACKOFF = 0.05
# a request is not run again once it has taken this long (each try may have waited for a lock)
REQUEST_RETRY_BUDGET_SECONDS = 15.0
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "ALTER", "DROP")


def is_lock_contention(exc: BaseException) -> bool:
    """True for an error that says another writer held a lock (not that the database is
    down, nor that the statement is wrong)."""
    if not isinstance(exc, DatabaseError):
        return False
    cause = exc.__cause__ or exc
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if code in POSTGRES_CONTENTION:
        return True
    message = str(exc).lower()
    return any(text in message for text in SQLITE_CONTENTION)


def retry_on_contention(fn: Callable[..., T], *args: Any, attempts: int = ATTEMPTS,
                        what: str = "", **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, run again (backoff 0.05, 0.1, 0.2 s …) while lock contention
    ends it, at most `attempts` times in all. Outside an atomic block only: inside one, the
    transaction is already broken and the outermost caller must start it again."""
    for attempt in range(1, attempts + 1):
        try:
            return fn(*args, **kwargs)
        except DatabaseError as exc:
            if (attempt == attempts or not is_lock_contention(exc)
                    or connection.in_atomic_block):
                raise
            log.info("lock contention in %s (try %d of %d), again: %s",
                     what or getattr(fn, "__qualname__", fn), attempt, attempts, exc)
            time.sleep(FIRST_BACKOFF * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


class ContentionRetryMiddleware:
    """Runs a request again when lock contention ended it before it wrote anything."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        replayable = self._keep_body(request)
        started = time.monotonic()
        for attempt in range(1, ATTEMPTS + 1):
            seen = _Statements()
            with connection.execute_wrapper(seen):
                response = self.get_response(request)
            # only an answer that contention ended (portal/errors.py marks it), and only when
            # nothing was written before that contention
            if (not getattr(response, "lock_contention", False) or not seen.contended
                    or seen.writes_before_contention or not replayable or attempt == ATTEMPTS
                    or time.monotonic() - started > REQUEST_RETRY_BUDGET_SECONDS):
                return response
            log.info("lock contention in %s %s (try %d of %d), again", request.method,
                     request.path, attempt, ATTEMPTS)
            time.sleep(FIRST_BACKOFF * 2 ** (attempt - 1))
        return response

    @staticmethod
    def _keep_body(request: HttpRequest) -> bool:
        """Read the body now (a retry must see it again); False when it is too big to keep."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return False
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if length and limit is not None and length > limit:
            return False
        if length:
            request.body  # noqa: B018 - cached on the request from here on
        return True


class _Statements:
    """An execute wrapper: counts the writes that succeeded, and how many came before the
    latest contention (the one that ended the request, if one did)."""

    def __init__(self) -> None:
        self.writes = 0
        self.contended = False
        self.writes_before_contention = 0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: dict[str, Any]) -> Any:
        try:
            result = execute(sql, params, many, context)
        except DatabaseError as exc:
            if is_lock_contention(exc):
                self.contended = True
                self.writes_before_contention = self.writes
            raise
        if sql.lstrip()[:8].upper().startswith(WRITES):
            self.writes += 1
        return result
