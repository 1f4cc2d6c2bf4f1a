"""The test harness's database between tests (tests/fixtures/database.py): a transactional test
rolls back by serialization, the migrations' rows come back after its flush, and a flush that
met a deadlock with a portal process writing at that moment is tried again, whatever shape
Django reports it in."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.db import OperationalError, connection

from catalogue.models import Template
from tests.fixtures.database import deadlocked, migrated_rows_back

DEADLOCK = OperationalError("deadlock detected\nDETAIL:  Process 1 waits for AccessExclusiveLock "
                            "on relation 2; blocked by process 3.")


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_rolls_back_by_serialization(request):
    marker = request.node.get_closest_marker("django_db")
    assert marker.kwargs == {"transaction": True, "serialized_rollback": True}
    assert Template.objects.filter(slug="jupyter").exists()  # put back before it started


@pytest.mark.django_db(transaction=True)
def test_a_flush_that_met_a_deadlock_is_tried_again(monkeypatch):
    """PostgreSQL aborted the flush's TRUNCATE (a Celery worker of the browser journeys held a
    table it needed): the flush command raised CommandError from the OperationalError, the
    retry let it through, the test erred at teardown and the next one found its rows."""
    operations = type(connection.ops)
    original = operations.execute_sql_flush
    tries = []

    def deadlocked_once(self, sql_list):
        tries.append(len(sql_list))
        if len(tries) == 1:
            raise DEADLOCK
        return original(self, sql_list)

    monkeypatch.setattr(operations, "execute_sql_flush", deadlocked_once)
    migrated_rows_back(flush=True)
    assert len(tries) == 2 and tries[1] > 0
    assert Template.objects.filter(slug="jupyter").exists()  # the seeded rows put back


@pytest.mark.django_db(transaction=True)
def test_a_new_row_after_the_rows_came_back_takes_a_free_id():
    """The restored rows keep their ids; the next row made must not be handed one of them (a
    full run's template form answered "exists already" after a flush had set the sequence
    back)."""
    with connection.cursor() as cursor:  # a sequence set back, as a table made again leaves it
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 1, false)",
                       [Template._meta.db_table])
    migrated_rows_back(flush=True)
    seeded = set(Template.objects.values_list("id", flat=True))
    made = Template.objects.create(slug="after-the-flush", name="After", kind="batch",
                                   image="registry.example/after:1")
    assert seeded and made.pk not in seeded and made.pk > max(seeded)
    # and one ahead of the rows is never moved back: a later row gets a later id
    migrated_rows_back(flush=True)
    later = Template.objects.create(slug="after-another-flush", name="Later", kind="batch",
                                    image="registry.example/after:1")
    assert later.pk > made.pk


@pytest.mark.django_db(transaction=True)
def test_other_flush_failures_are_not_hidden(monkeypatch):
    def broken(self, sql_list):
        raise OperationalError("relation does not exist")

    monkeypatch.setattr(type(connection.ops), "execute_sql_flush", broken)
    with pytest.raises(CommandError):
        migrated_rows_back(flush=True)
    monkeypatch.undo()
    migrated_rows_back(flush=True)  # the database back as the next test expects


def test_a_deadlock_is_seen_in_every_shape_a_teardown_reports_it():
    try:
        try:
            raise DEADLOCK
        except OperationalError as exc:
            raise CommandError("Database test_portal couldn't be flushed.") from exc
    except CommandError as exc:
        reported = exc
    assert deadlocked(DEADLOCK) and deadlocked(reported)
    assert deadlocked(BaseExceptionGroup("teardown", [ValueError("x"), reported]))
    assert not deadlocked(CommandError("Database test_portal couldn't be flushed."))
    assert not deadlocked(OperationalError("relation does not exist"))
