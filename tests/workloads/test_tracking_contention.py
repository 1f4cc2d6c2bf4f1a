"""The tracker loses no change to lock contention (a burst once saw 45 "database is locked"
tracebacks in ten minutes of the demo, each a lost cycle, and a finished Job shown pending for
90 s). A row lock another transaction holds past this connection's lock_timeout (PostgreSQL's
contention error, as "database is locked" is SQLite's) is waited out and retried; a database
that stays locked through every retry keeps the work to do and the cursors where they were, so
that the tracker writes what it could not once the database answers."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, connections

from tests.support.tracking import launch, make_tenant, state_of, track_until
from workloads.models import TrackerCursor, Workload
from workloads.tracking.tracker import Tracker, track

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(180)]


@pytest.fixture
def notebook(gpu_types, cluster, owner):  # noqa: F811 - the fixture imported above
    from kube.client import Kube

    tenant = make_tenant()
    workload = launch(tenant, owner, gpu_types, name="notebook", template="jupyter",
                      kind="service")
    yield workload
    Kube().delete("Namespace", tenant.namespace)


class RowLock:
    """Another connection's transaction holding a workload's row lock."""

    def __init__(self, workload_id: int) -> None:
        self.other = connections.create_connection("default")
        self.other.inc_thread_sharing()  # released from a timer's thread
        self.other.set_autocommit(False)
        with self.other.cursor() as cursor:
            cursor.execute("SELECT id FROM workloads_workload WHERE id = %s FOR UPDATE",
                           [workload_id])

    def release(self) -> None:
        if self.other.connection is not None:
            self.other.commit()
            self.other.close()


@pytest.fixture
def row_lock():
    """row_lock(workload_id) holds its row; every lock is let go at the end, whatever failed
    (a flush waiting for it would hang the run)."""
    held: list[RowLock] = []

    def hold(workload_id: int) -> RowLock:
        held.append(RowLock(workload_id))
        return held[-1]

    yield hold
    for lock in held:
        lock.release()


@pytest.fixture
def short_lock_timeout():
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '100ms'")  # the tracker waits that long per try
    yield
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = 0")


class ReleaseOnRetry(logging.Handler):
    """Lets the lock go when the tracker says it met it and will try again."""

    def __init__(self, lock: RowLock) -> None:
        super().__init__(logging.INFO)
        self.row_lock = lock
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "lock contention in tracker" in record.getMessage():
            self.retries += 1
            if self.retries == 1:
                self.row_lock.release()


def test_a_locked_row_is_waited_out_and_the_change_written(notebook, short_lock_timeout,
                                                           row_lock):
    handler = ReleaseOnRetry(row_lock(notebook.pk))
    logger = logging.getLogger("core.contention")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    tracker = Tracker()
    try:
        track_until(tracker, lambda: state_of(notebook).state == Workload.State.RUNNING,
                    timeout=30)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

    assert handler.retries >= 1  # it did meet the lock, and tried again
    assert tracker.stats.errors == 0


def test_a_database_locked_through_every_retry_loses_no_change(notebook, short_lock_timeout,
                                                                caplog, row_lock):
    lock = row_lock(notebook.pk)  # held through the whole run
    tracker = Tracker()
    # Every kind listed before the first write: a kind whose list arrived alone, with nothing
    # of the notebook in it, would rightly have its cursor stored by a write of its own, and
    # whether one did would depend on how fast each list came back.
    tracker.start()
    assert all(r.synced for r in tracker.reflectors.values())
    try:
        with caplog.at_level(logging.WARNING):
            track(duration=3, tracker=tracker)
        assert tracker.stats.errors >= 1
        assert "tracker: the database is unavailable" in caplog.text
        assert state_of(notebook).state == Workload.State.PENDING  # not written …
        assert not TrackerCursor.objects.exists()  # … so no cursor was stored past it
    finally:
        lock.release()

    track(duration=2, tracker=tracker)

    assert tracker.stats.lists == 7 and tracker.stats.errors == 0  # no cursor: every kind
    assert state_of(notebook).state == Workload.State.RUNNING
    assert TrackerCursor.objects.count() == 7
