"""Lock contention is not an outage: SQLite databases are opened for concurrent
writers, admission stays serialised on them, contention is told apart from a database that is
down, and a request that contention ended before it wrote is run again."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import environ
import pytest
from django.db import OperationalError, connection, connections
from django.test import Client

from api.errors import exception_handler
from core.contention import is_lock_contention
from portal.database import PORTAL_SQLITE_ENGINE, SQLITE_INIT, for_concurrent_writers
from portal.sqlite.base import DatabaseWrapper as SqliteWrapper
from stack.demo_stack import shared_schema
from stack.procs import REPO, free_port


@pytest.mark.parametrize("url", ["sqlite:////tmp/portal.sqlite3", "sqlite:///relative.db"])
def test_every_sqlite_url_is_set_up_for_concurrent_writers(url):
    config = for_concurrent_writers(environ.Env.db_url_config(url), lock_timeout=20.0)
    assert config["OPTIONS"] == {"timeout": 20.0, "transaction_mode": "IMMEDIATE",
                                 "init_command": SQLITE_INIT}
    assert config["ENGINE"] == PORTAL_SQLITE_ENGINE


def test_options_in_the_url_win_and_other_engines_are_left_alone():
    given = for_concurrent_writers(
        environ.Env.db_url_config("sqlite:////tmp/p.sqlite3?timeout=60"), lock_timeout=20.0)
    assert given["OPTIONS"]["timeout"] == 60
    memory = for_concurrent_writers(environ.Env.db_url_config("sqlite://"), lock_timeout=5)
    assert "init_command" not in memory["OPTIONS"]  # no WAL for an in-memory database
    postgres = environ.Env.db_url_config("postgres://portal@127.0.0.1:5432/portal")
    assert for_concurrent_writers(postgres, lock_timeout=5) == postgres


def sqlite_connection(path, *, timeout: float, immediate: bool = True) -> SqliteWrapper:
    """A Django SQLite connection configured as settings.py configures one."""
    config = for_concurrent_writers(environ.Env.db_url_config(f"sqlite:///{path}"),
                                    lock_timeout=timeout)
    if not immediate:
        config["OPTIONS"].pop("transaction_mode")
    config.update({"TIME_ZONE": None, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False,
                   "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False})
    return SqliteWrapper(config, alias=f"probe-{uuid.uuid4().hex[:6]}")


@pytest.mark.django_db  # pytest-django lets no connection open without it
def test_sqlite_writers_wait_for_each_other_in_wal(tmp_path):
    path = tmp_path / "db.sqlite3"
    first = sqlite_connection(path, timeout=10)
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE t (n integer)")
        assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder = sqlite3.connect(path, check_same_thread=False)  # committed from a timer
    holder.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock for 0.5 s
    holder.execute("INSERT INTO t VALUES (1)")
    threading.Timer(0.5, holder.commit).start()
    with first.cursor() as cursor:  # readers go on (a cursor's read ends when it closes)
        assert cursor.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    started = time.monotonic()
    with first.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (2)")  # waits for the lock instead of failing
    assert time.monotonic() - started >= 0.3
    with first.cursor() as cursor:
        assert cursor.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    first.close()
    holder.close()


def hold_write_lock(path, seconds: float | None = None) -> sqlite3.Connection:
    """Another process's writer: it takes the write lock now and commits `seconds` later
    (None: when the caller ends its transaction)."""
    holder = sqlite3.connect(path, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (0)")
    if seconds is not None:
        threading.Timer(seconds, holder.commit).start()
    return holder


@pytest.mark.django_db  # pytest-django lets no connection open without it
def test_a_transaction_polls_for_the_write_lock_and_gives_up_at_its_timeout(tmp_path):
    """atomic() begins IMMEDIATE: BEGIN waits for the write lock by trying again every few
    milliseconds (not in SQLite's busy handler, whose sleeps grow to 100 ms), for as long as
    the connection's timeout, and the connection's busy wait for other statements stays."""
    path = tmp_path / "db.sqlite3"
    writer = sqlite_connection(path, timeout=5)
    with writer.cursor() as cursor:
        cursor.execute("CREATE TABLE t (n integer)")
    holder = hold_write_lock(path, 0.2)
    started = time.monotonic()
    writer.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    waited = time.monotonic() - started
    with writer.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (1)")
    writer.commit()
    writer.set_autocommit(True)
    holder.close()
    assert 0.15 <= waited < 5  # its turn came when the other writer committed
    with writer.cursor() as cursor:
        assert cursor.execute("SELECT count(*) FROM t").fetchone()[0] == 2
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    writer.close()

    impatient = sqlite_connection(path, timeout=0.4)
    holder = hold_write_lock(path)  # held past its timeout
    started = time.monotonic()
    with pytest.raises(OperationalError) as caught:
        impatient.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    assert 0.4 <= time.monotonic() - started < 2.5
    assert is_lock_contention(caught.value)  # waited for and retried upstream, not an outage
    with impatient.cursor() as cursor:
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] == 400
    holder.rollback()
    holder.close()
    impatient.close()


def captured_sqlite_lock(tmp_path) -> OperationalError:
    """The error Django raises when another SQLite writer keeps the lock past the timeout."""
    path = tmp_path / "locked.sqlite3"
    waiting = sqlite_connection(path, timeout=0.1)
    with waiting.cursor() as cursor:
        cursor.execute("CREATE TABLE t (n integer)")
    holder = sqlite3.connect(path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with waiting.cursor() as cursor, pytest.raises(OperationalError) as caught:
            cursor.execute("INSERT INTO t VALUES (1)")
    finally:
        holder.rollback()
        holder.close()
        waiting.close()
    return caught.value


# serialized_rollback: like every transactional test here (the migrations' rows come back)
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_contention_is_told_apart_from_an_outage(tmp_path):
    locked = captured_sqlite_lock(tmp_path)
    assert "database is locked" in str(locked) and is_lock_contention(locked)

    # PostgreSQL: a row lock another connection holds, past this connection's lock_timeout
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS contention_probe (n integer)")
        cursor.execute("INSERT INTO contention_probe VALUES (1)")
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT n FROM contention_probe FOR UPDATE")
        with connection.cursor() as cursor, pytest.raises(OperationalError) as caught:
            cursor.execute("SET lock_timeout = '50ms'")
            cursor.execute("SELECT n FROM contention_probe FOR UPDATE")
        assert is_lock_contention(caught.value)
    finally:
        other.rollback()
        other.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
            cursor.execute("DROP TABLE contention_probe")

    # a database that is not there at all: an outage, not contention
    down = connections.create_connection("default")
    down.settings_dict = {**down.settings_dict, "PORT": str(free_port())}
    with pytest.raises(OperationalError) as refused:
        down.ensure_connection()
    assert not is_lock_contention(refused.value)


@pytest.mark.django_db
def test_the_api_answers_contention_busy_and_an_outage_unavailable(tmp_path):
    busy = exception_handler(captured_sqlite_lock(tmp_path), {})
    assert busy.status_code == 503 and busy.data["code"] == "database_busy"
    assert busy["Retry-After"] == "1" and busy.lock_contention
    down = exception_handler(OperationalError("connection refused"), {})
    assert down.status_code == 503 and down.data["code"] == "database_unavailable"
    assert not getattr(down, "lock_contention", False)


ADMISSION_ON_SQLITE = r"""
import threading, uuid, django, sys
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from identity.models import User
from workloads.models import GpuType, Template, Workload
from workloads.services import AdmissionRefused, workload_launch
from workloads.transitions import workload_transition
from tenants.services import quota_update, tenant_ensure
assert connection.vendor == "sqlite"
a100 = GpuType.objects.create(slug="a100", name="A100", node_selector={"gputype": "a100"})
tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"race-lab {uuid.uuid4().hex[:6]}")
quota_update(tenant=tenant, acting_user=None, changes={"gpus_total": 100, "gpus_by_type": {"a100": 4},
             "max_workloads": 100, "cpu": 1000, "memory_gb": 10000})
user = User.objects.create(username="racer", keystone_user_id=uuid.uuid4().hex)
request = {"name": "race", "template": Template.objects.get(slug="custom"), "kind": "batch",
           "gpu_type": a100, "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1}
barrier = threading.Barrier(51)
admitted, refused, errors = [], [], []
def attempt(i):
    try:
        barrier.wait(timeout=30)
        admitted.append(workload_launch(tenant=tenant, user=user, request={**request, "name": f"race {i}"})[0].pk)
    except AdmissionRefused:
        refused.append(i)
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connection.close()
def tracker_like():  # a writer beside the launches, as the tracker and the workers are
    try:
        barrier.wait(timeout=30)
        for _ in range(100):
            for pk in list(admitted):
                workload_transition(workload_id=pk, allowed_from=("submitted", "creating"),
                                    to="creating", reason="")
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connection.close()
threads = [threading.Thread(target=attempt, args=(i,)) for i in range(50)]
threads.append(threading.Thread(target=tracker_like))
[t.start() for t in threads]; [t.join(120) for t in threads]
print("RESULT", len(admitted), len(refused), Workload.objects.filter(tenant=tenant).count(), errors[:3])
"""


def test_admission_never_over_admits_on_sqlite(tmp_path, demo_schema):
    """select_for_update is a no-op on SQLite: the immediate transaction is what serialises
    admission there. 50 launches at once against a quota of 4, beside another writer. The
    database is a copy of the run's migrated one (its `migrate` then has nothing to do):
    migrating SQLite from nothing is most of a minute on a busy machine."""
    shutil.copy2(shared_schema(demo_schema, static=False) / "portal.sqlite3", tmp_path / "portal.sqlite3")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "PORTAL_DEBUG": "1",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite3'}",
           "PORTAL_LOG_LEVEL": "WARNING"}
    done = subprocess.run([sys.executable, "-c", ADMISSION_ON_SQLITE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    result = next((line for line in done.stdout.splitlines() if line.startswith("RESULT")), None)
    assert result is not None, done.stdout[-2000:] + done.stderr[-3000:]
    assert result == "RESULT 4 46 4 []", result


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_launch_that_met_a_lock_is_run_again_not_refused(keystone, project_token, gpu_types):
    """The tenant row is locked by another transaction longer than this connection waits
    (PostgreSQL's lock_timeout): the launch's first try ends in contention, before it wrote
    anything, so the middleware runs it again, and it is admitted once the lock is gone."""
    from tenants.models import Tenant
    from tenants.services import quota_update

    token = project_token("researcher", "vision-lab")
    client = Client()
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200  # tenant row
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 4, "gpus_by_type": {"a100": 4}})
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '150ms'")  # this thread's requests wait that long
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        other.inc_thread_sharing()  # committed from a timer's thread
        with other.cursor() as cursor:
            cursor.execute("SELECT id FROM tenants_tenant WHERE id = %s FOR UPDATE", [tenant.pk])
        threading.Timer(0.4, other.commit).start()
        started = time.monotonic()
        response = client.post("/api/v1/workloads/", {"name": "after the lock",
                                                      "template": "jupyter", "gpu_type": "a100",
                                                      "gpu_count": 1},
                               content_type="application/json", HTTP_X_AUTH_TOKEN=token)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert response.status_code == 201, response.content
    assert time.monotonic() - started >= 0.3  # it did wait for the lock
    other.close()
