"""What the portal answers while its database is away or busy: the bodies and Retry-After values
that the pages' handlers (portal/errors.py) and the API's (api/errors.py) share."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

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
