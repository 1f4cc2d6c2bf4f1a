"""The portal's database settings beyond its URL: what an SQLite database needs to take the
portal's concurrent writers (web threads and processes, Celery workers, the tracker).

SQLite allows one writer at a time. Out of the box, Django's SQLite connections fail at once
with "database is locked" in two cases, and the demo's burst hit both:
- a writer finds the database locked by another one: it gives up after Python's default busy
  timeout of 5 s — here `timeout` (PORTAL_DB_LOCK_TIMEOUT, 20 s) makes it wait longer;
- a transaction that began by reading (Django's plain BEGIN is DEFERRED) tries to write while
  another holds the write lock: SQLite cannot let it wait (the other one may be waiting for
  it), so it fails without waiting, whatever the timeout. With `transaction_mode: IMMEDIATE`
  every `transaction.atomic()` takes the write lock at BEGIN, so it waits its turn instead.
  This is also what keeps admission serialised on SQLite, which ignores SELECT … FOR UPDATE:
  `workload_launch` reads the tenant's usage and writes the new workload inside one atomic
  block, and no other writer can commit between the two.
- a transaction's BEGIN IMMEDIATE polls for the lock every few milliseconds (the `portal.sqlite`
  engine, portal/sqlite/base.py): SQLite's own busy handler sleeps up to 100 ms at a time, and a
  burst's last admissions slept while the lock was free;
- WAL (write-ahead log): readers never wait for the writer nor block it, so page views and
  GETs go on while a launch or the tracker writes. `synchronous=NORMAL` is WAL's usual
  setting: a commit is not fsynced until the next checkpoint (a power cut may lose the last
  transactions, never corrupts the file).

These apply to every SQLite DATABASE_URL, not only the demo's; options given in the URL
(`sqlite:////path/db.sqlite3?timeout=60`) win.
"""

from __future__ import annotations

from typing import Any

SQLITE_ENGINE = "django.db.backends.sqlite3"
# Django's, with a closer wait for the write lock at BEGIN (portal/sqlite/base.py)
PORTAL_SQLITE_ENGINE = "portal.sqlite"
SQLITE_INIT = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"


def is_memory(name: str) -> bool:
    return not name or name == ":memory:" or "mode=memory" in name


def for_concurrent_writers(config: dict[str, Any], *, lock_timeout: float) -> dict[str, Any]:
    """The DATABASES entry `config`, with SQLite set up for concurrent writers (see above);
    any other engine is returned as it is."""
    if config.get("ENGINE") != SQLITE_ENGINE:
        return config
    options = dict(config.get("OPTIONS") or {})
    config = {**config, "ENGINE": PORTAL_SQLITE_ENGINE}
    options.setdefault("timeout", lock_timeout)
    options.setdefault("transaction_mode", "IMMEDIATE")
    if not is_memory(str(config.get("NAME", ""))):
        options.setdefault("init_command", SQLITE_INIT)
    return {**config, "OPTIONS": options}
