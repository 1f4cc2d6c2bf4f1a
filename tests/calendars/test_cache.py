"""The calendar the launch check holds in the process (calendars/cache.py): it answers exactly as
the database reads do, and every write of what it holds — through a service, a plain
`.update()`, a rollback, another process — is seen by the next check; a check while nothing
changed reads the calendar's version alone. The version's triggers (migration 0004) change it
for the writes the check depends on, not for the beat's other steps."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sqlite3
import subprocess
import sys

import pytest
from django.db import connection, transaction

from calendars.cache import calendar_token, shared_calendar
from calendars.models import MaintenanceWindow, Reservation, ReservationOccurrence
from calendars.selectors import live_windows, occurrences_between
from calendars.services import reservation_cancel, window_cancel
from catalogue.models import GpuType
from core.registry import SharedReads
from tenants.models import Tenant
from tests.fixtures import factories

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2030, 3, 4, 6, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
version_migration = importlib.import_module("calendars.migrations.0004_calendar_version")


@pytest.fixture
def tenants(db, gpu_types) -> dict[str, Tenant]:
    return {name: factories.make_tenant(name, gpus_by_type={"a100": 4})
            for name in ("vision-lab", "nlp-lab")}


def booking(tenant: Tenant, start: dt.datetime, hours: int = 2, count: int = 2,
            **fields) -> Reservation:
    return Reservation.objects.create(tenant=tenant, gpu_type=GpuType.objects.get(slug="a100"),
                                      count=count, start=start, end=start + hours * HOUR,
                                      **fields)


def window(start: dt.datetime, **fields) -> MaintenanceWindow:
    values = {"nodes": ["gpu-a100-1"], "affected": {"gpu-a100-1": {"gpu_type": "a100",
                                                                    "gpus": 8}}, **fields}
    return MaintenanceWindow.objects.create(start=start, end=start + 2 * HOUR,
                                            reason="driver update", **values)


def occurrence_rows(occurrences) -> list[tuple]:
    return [(o.reservation.pk, o.reservation.tenant.name, o.reservation.count, o.start, o.end,
             o.released) for o in occurrences]


def window_rows(windows) -> list[tuple]:
    return [(w.pk, w.start, w.end, w.state, w.affected, w.nodes,
             w.gpu_type.node_selector if w.gpu_type is not None else None) for w in windows]


def vision_id() -> int:
    return Tenant.objects.get(keystone_project_id="project-vision-lab").pk


def held(at: dt.datetime = NOW) -> tuple[list[tuple], list[tuple], tuple | None]:
    """What a check at `at` reads of the calendar: the live windows, the a100 occurrences of
    the next day, and the first occurrence to start in the year of another tenant than
    vision-lab."""
    a100 = GpuType.objects.get(slug="a100")
    calendar = shared_calendar(SharedReads(), at)
    first = calendar.next_occurrence(a100, at, at + 366 * DAY, other_than_tenant=vision_id())
    return (window_rows(calendar.live_windows(at)),
            occurrence_rows(calendar.occurrences(a100, at, at + DAY)),
            (first.reservation.pk, first.start, first.end) if first is not None else None)


def read(at: dt.datetime = NOW) -> tuple[list[tuple], list[tuple], tuple | None]:
    """The same from the database, every time."""
    a100 = GpuType.objects.get(slug="a100")
    year = [o for o in occurrences_between(a100, at, at + 366 * DAY)
            if o.start > at and o.reservation.tenant_id != vision_id()]
    first = min(year, key=lambda o: (o.start, o.reservation.pk), default=None)
    return (window_rows(live_windows(at)), occurrence_rows(occurrences_between(a100, at, at + DAY)),
            (first.reservation.pk, first.start, first.end) if first is not None else None)


def test_every_write_is_seen_by_the_next_check(tenants, gpu_types):
    vision, nlp = tenants["vision-lab"], tenants["nlp-lab"]
    assert held() == read()
    course = booking(nlp, NOW + 3 * HOUR)  # a plain create, no service
    assert held() == read() and held()[1][0][0] == course.pk
    weekly = booking(vision, NOW - 7 * DAY + 5 * HOUR, recurrence="weekly",
                     until=NOW + 60 * DAY)
    later = booking(nlp, NOW + 40 * DAY)
    seen = held()
    assert seen == read() and [row[0] for row in seen[1]] == [course.pk, weekly.pk]
    assert seen[2][0] == course.pk
    Reservation.objects.filter(pk=course.pk).update(cancelled_at=NOW)  # as a shell would
    assert held() == read() and held()[2][0] == later.pk
    # the beat releases this week's occurrence of the weekly one unused, an hour in
    start = NOW + 5 * HOUR
    row = ReservationOccurrence.objects.create(reservation=weekly, start=start, end=start + 2 * HOUR)
    ReservationOccurrence.objects.filter(pk=row.pk).update(released_at=start + HOUR)
    seen = held()
    assert seen == read() and seen[1][0][4:] == (start + HOUR, True)
    assert reservation_cancel(reservation=later, acting_user=None)
    assert held() == read() and held()[2] is None
    # windows: announced, moved on by the beat, cancelled
    first = window(NOW + 2 * HOUR)
    assert held() == read() and [row[0] for row in held()[0]] == [first.pk]
    everything = window(NOW + 26 * HOUR, nodes=[], affected={}, gpu_type=gpu_types["a100"])
    MaintenanceWindow.objects.filter(pk=first.pk).update(state=MaintenanceWindow.State.ACTIVE)
    assert held() == read() and held()[0][0][3] == MaintenanceWindow.State.ACTIVE
    assert window_cancel(window=everything, acting_user=None)
    assert held() == read() and len(held()[0]) == 1
    # what the held rows carry of other apps' rows: a tenant's name, a GPU type's nodes
    weekly_row = next(r for r in held()[1] if r[0] == weekly.pk)
    assert weekly_row[1] == "vision-lab"
    Tenant.objects.filter(pk=vision.pk).update(name="vision-group")
    assert next(r for r in held()[1] if r[0] == weekly.pk)[1] == "vision-group"
    typed = window(NOW + 30 * HOUR, nodes=[], affected={}, gpu_type=gpu_types["a100"])
    GpuType.objects.filter(pk=gpu_types["a100"].pk).update(node_selector={"gputype": "a100x"})
    assert next(r for r in held()[0] if r[0] == typed.pk)[6] == {"gputype": "a100x"}
    assert held() == read()


def test_a_check_at_an_earlier_instant_reads_the_calendar_for_it(tenants):
    nlp = tenants["nlp-lab"]
    yesterday = booking(nlp, NOW - 20 * HOUR)  # over by NOW
    assert held() == read() and held()[1] == []
    assert held(NOW - DAY) == read(NOW - DAY)
    assert held(NOW - DAY)[1][0][0] == yesterday.pk


def test_a_check_whose_day_leaves_the_week_held_reads_the_calendar_again(tenants):
    """What is held is a week of reservations: a check whose day ahead leaves it reads the
    calendar again, and the first reservation of a year after the week comes from the
    database."""
    nlp = tenants["nlp-lab"]
    week_on = booking(nlp, NOW + 7 * DAY + 2 * HOUR)
    year_on = booking(nlp, NOW + 200 * DAY, recurrence="weekly", until=NOW + 300 * DAY)
    assert held() == read() and held()[1] == [] and held()[2][0] == week_on.pk
    for at in (NOW + 5 * DAY, NOW + 6 * DAY + 12 * HOUR, NOW + 7 * DAY, NOW + 8 * DAY):
        assert held(at) == read(at), at
    assert held(NOW + 6 * DAY + 12 * HOUR)[1][0][0] == week_on.pk
    assert held(NOW + 8 * DAY)[2][0] == year_on.pk


def test_a_rolled_back_write_is_not_seen_nor_taken_for_a_later_one(tenants):
    nlp = tenants["nlp-lab"]
    assert held() == read()
    with pytest.raises(RuntimeError), transaction.atomic():
        booking(nlp, NOW + 3 * HOUR)
        assert len(held()[1]) == 1  # the writing transaction sees its own write
        raise RuntimeError("rolled back")
    assert held() == read() and held()[1] == []
    other = booking(nlp, NOW + 4 * HOUR, count=1)
    assert held() == read() and [row[0] for row in held()[1]] == [other.pk]


def test_a_check_reads_the_version_alone_while_the_calendar_is_unchanged(
        tenants, django_assert_num_queries):
    course = booking(tenants["nlp-lab"], NOW + 3 * HOUR)
    window(NOW + 2 * HOUR)
    row = ReservationOccurrence.objects.create(reservation=course, start=course.start,
                                               end=course.end)
    a100 = GpuType.objects.get(slug="a100")

    def check() -> None:
        calendar = shared_calendar(SharedReads(), NOW)
        calendar.live_windows(NOW)
        calendar.occurrences(a100, NOW, NOW + DAY)

    # after a write: the version, the windows, the type's reservations and their releases
    with django_assert_num_queries(4):
        check()
    with django_assert_num_queries(1):
        check()
    ReservationOccurrence.objects.filter(pk=row.pk).update(warned_at=NOW)  # the beat's
    with django_assert_num_queries(1):
        check()


def test_the_beats_other_steps_leave_the_version_as_it_is(tenants):
    """Only what the check reads changes the version: an occurrence's other steps (warned,
    applied, ended, the excess told…), a tenant's state, leave it, so that the process keeps
    its calendar through the beat's every minute and the beat's steps, which notify and stop
    workloads in the transaction of their claim, hold no lock on the version."""
    course = booking(tenants["nlp-lab"], NOW + 3 * HOUR)
    token = calendar_token()
    row = ReservationOccurrence.objects.create(reservation=course, start=course.start,
                                               end=course.end)
    ReservationOccurrence.objects.filter(pk=row.pk).update(warned_at=NOW, applied_at=NOW)
    Tenant.objects.filter(pk=course.tenant_id).update(state="drifted")
    Tenant.objects.filter(pk=course.tenant_id).update(name="nlp-lab")  # the same name
    assert calendar_token() == token
    ReservationOccurrence.objects.filter(pk=row.pk).update(released_at=NOW + 4 * HOUR)
    released = calendar_token()
    assert released != token
    ReservationOccurrence.objects.filter(pk=row.pk).update(ended_at=NOW + 4 * HOUR,
                                                           excess_told_at=NOW + 4 * HOUR)
    assert calendar_token() == released  # a released one's later steps too


WRITER = """
import json, sys
import psycopg
with psycopg.connect(**json.loads(sys.argv[1])) as conn:
    conn.execute(sys.argv[2], json.loads(sys.argv[3]))
"""


@pytest.mark.django_db(transaction=True)
def test_a_write_by_another_process_is_seen_by_the_next_check(gpu_types):
    """Another process (a web worker, the beat, psql) writes with nothing of this one's code:
    the next check here sees it."""
    nlp = factories.make_tenant("nlp-lab", gpus_by_type={"a100": 4})
    factories.make_tenant("vision-lab", gpus_by_type={"a100": 4})
    course = booking(nlp, NOW + 3 * HOUR)
    first = window(NOW + 2 * HOUR)
    assert held() == read() and len(held()[1]) == 1 and len(held()[0]) == 1
    settings = connection.settings_dict
    params = {"dbname": settings["NAME"], "user": settings["USER"],
              "password": settings["PASSWORD"], "host": settings["HOST"],
              "port": settings["PORT"]}

    def elsewhere(sql: str, *args) -> None:
        subprocess.run([sys.executable, "-c", WRITER, json.dumps(params), sql,
                        json.dumps(list(args))], check=True, timeout=60)

    elsewhere("UPDATE calendars_reservation SET cancelled_at = now() WHERE id = %s", course.pk)
    assert held() == read() and held()[1] == []
    elsewhere("UPDATE calendars_maintenancewindow SET \"end\" = \"start\" + interval '30 minutes' "
              "WHERE id = %s", first.pk)
    assert held() == read() and held()[0][0][2] == first.start + dt.timedelta(minutes=30)


# --- the demo's database: the same triggers on SQLite -----------------------------------------

TABLES = {
    "calendars_calendarversion": "id integer PRIMARY KEY, token text",
    "calendars_reservation": "id integer PRIMARY KEY, count integer",
    "calendars_maintenancewindow": "id integer PRIMARY KEY, reason text",
    "calendars_reservationoccurrence": "id integer PRIMARY KEY, reservation_id integer, "
                                       "start text, warned_at text, released_at text",
    "tenants_tenant": "id integer PRIMARY KEY, name text, state text",
    "workloads_gputype": "id integer PRIMARY KEY, node_selector text",
}


def test_the_triggers_change_the_version_on_sqlite(tmp_path):
    db = sqlite3.connect(tmp_path / "demo.sqlite3", isolation_level=None)
    for table, columns in TABLES.items():
        db.execute(f"CREATE TABLE {table} ({columns})")
    for statement in version_migration.sqlite_statements():
        db.execute(statement)
    db.execute("INSERT INTO calendars_calendarversion VALUES (1, 'migrated')")
    seen = ["migrated"]

    def changed(sql: str) -> bool:
        db.execute(sql)
        token = db.execute("SELECT token FROM calendars_calendarversion").fetchone()[0]
        fresh = token not in seen
        seen.append(token)
        return fresh

    assert changed("INSERT INTO calendars_reservation VALUES (1, 2)")
    assert changed("UPDATE calendars_reservation SET count = 4")
    assert changed("INSERT INTO calendars_maintenancewindow VALUES (1, 'driver')")
    assert changed("DELETE FROM calendars_maintenancewindow")
    assert not changed("INSERT INTO calendars_reservationoccurrence VALUES (1, 1, 'monday', "
                       "NULL, NULL)")
    assert not changed("UPDATE calendars_reservationoccurrence SET warned_at = 'now'")
    assert changed("UPDATE calendars_reservationoccurrence SET released_at = 'now'")
    assert not changed("UPDATE calendars_reservationoccurrence SET warned_at = 'later'")
    assert changed("UPDATE calendars_reservationoccurrence SET start = 'tuesday'")
    assert changed("DELETE FROM calendars_reservationoccurrence")
    assert not changed("INSERT INTO tenants_tenant VALUES (1, 'lab', 'new')")
    assert not changed("UPDATE tenants_tenant SET state = 'provisioned'")
    assert not changed("UPDATE tenants_tenant SET name = 'lab'")
    assert changed("UPDATE tenants_tenant SET name = 'lab-2'")
    assert changed("INSERT INTO workloads_gputype VALUES (1, '{}')")
    assert changed("UPDATE workloads_gputype SET node_selector = '{\"gputype\": \"a100\"}'")
    db.execute("DELETE FROM calendars_calendarversion")  # a flush emptied the table
    assert changed("INSERT INTO calendars_reservation VALUES (2, 1)")  # the row made again
