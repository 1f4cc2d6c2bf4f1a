"""The tracker's sweep query on SQLite, the demo's database (the tests run on PostgreSQL): a
comparison of KT() with a string made SQLite fail with "malformed JSON" for every workload
whose launch spec names an engine (even an empty one), so the demo's tracker failed each
sweep. The query is compiled for SQLite and run on a database of the tables it reads."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import environ
import pytest
from django.db.backends.sqlite3.base import DatabaseWrapper as SqliteWrapper

from workloads.tracking.states import live_of_kind

pytestmark = pytest.mark.django_db  # pytest-django lets no connection open without it

NOW = dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC)


@pytest.fixture
def sqlite(tmp_path):
    config = environ.Env.db_url_config(f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    config.update({"TIME_ZONE": None, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False,
                   "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "OPTIONS": {}})
    connection = SqliteWrapper(config, alias=f"sqlite-{uuid.uuid4().hex[:6]}")
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE tenants_tenant (id integer PRIMARY KEY, namespace text)")
        cursor.execute("CREATE TABLE workloads_workload (id integer PRIMARY KEY, tenant_id "
                       "integer, state text, kind text, updated_at text, created_at text, "
                       "launch_spec text, cluster text)")
        cursor.execute("INSERT INTO tenants_tenant VALUES (1, 'gp-lab')")
        before = (NOW - dt.timedelta(minutes=5)).isoformat(" ").replace("+00:00", "")
        for pk, kind, spec in ((1, "batch", {}), (2, "batch", {"engine": ""}),
                               (3, "batch", {"engine": "jobset"}),
                               (4, "batch", {"engine": "mpi"}),
                               (5, "service", {"engine": ""})):
            cursor.execute("INSERT INTO workloads_workload VALUES (%s, 1, 'running', %s, %s, "
                           "%s, %s, 'main')", [pk, kind, before, before, json.dumps(spec)])
    yield connection
    connection.close()


@pytest.mark.parametrize(("kind", "expected"), [
    ("Job", [1, 2]), ("JobSet", [3]), ("MPIJob", [4]), ("Deployment", [5])])
def test_the_sweep_query_runs_on_sqlite(sqlite, kind, expected):
    query = live_of_kind(kind, NOW).query
    sql, params = query.get_compiler(connection=sqlite).as_sql()
    with sqlite.cursor() as cursor:
        cursor.execute(sql, params)
        found = sorted(row[0] for row in cursor.fetchall())
    assert found == expected
