"""Django's SQLite backend, waiting its turn for the write lock by polling it closely.

Every `transaction.atomic()` on the portal's SQLite begins IMMEDIATE (portal/database.py): it
takes the one write lock at BEGIN, and a writer that finds it taken waits in SQLite's busy
handler, which sleeps 1, 2, 5, 10 … and then 50 and 100 ms between tries. A burst of launches
has a dozen writers queueing at once (the web's admissions, the launch tasks' claims, the
tracker): a waiter that has slept its way up to 100 ms stays asleep while the lock is free
and others take it, so the last of a burst's admissions waited seconds for a lock held a few
milliseconds at a time. Here BEGIN IMMEDIATE alone is tried in Python with sleeps of 0.5 ms
doubling to at most MAX_POLL_SECONDS, for as long as the connection's `timeout`; every other
statement keeps SQLite's own busy wait.
"""

from __future__ import annotations

import sqlite3
import time

from django.db.backends.sqlite3 import base

from core.contention import SQLITE_CONTENTION

FIRST_POLL_SECONDS = 0.0005
MAX_POLL_SECONDS = 0.005
DEFAULT_TIMEOUT = 5.0  # Python's sqlite3 default, where OPTIONS give none


class DatabaseWrapper(base.DatabaseWrapper):
    def _start_transaction_under_autocommit(self) -> None:
        # OPTIONS' transaction_mode; the other modes begin as Django's backend begins them
        if getattr(self, "transaction_mode", None) != "IMMEDIATE":
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # not in the stubs
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", DEFAULT_TIMEOUT))
        raw = self.connection
        raw.execute("PRAGMA busy_timeout = 0")  # a taken lock answers at once: polled below
        try:
            deadline, poll = time.monotonic() + timeout, FIRST_POLL_SECONDS
            while True:
                try:
                    raw.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    locked = any(text in str(exc).lower() for text in SQLITE_CONTENTION)
                    if not locked or time.monotonic() >= deadline:
                        with self.wrap_database_errors:  # as Django's own cursor raises it
                            raise
                time.sleep(poll)
                poll = min(poll * 2, MAX_POLL_SECONDS)
        finally:
            raw.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
