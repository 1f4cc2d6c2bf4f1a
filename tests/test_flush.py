"""The test harness's flush after a transactional test (tests/fixtures/portal.py,
`flush_survives_a_deadlock`): a deadlock with a portal process writing at that moment is tried
again, whatever shape Django reports it in."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection
from django.test import TransactionTestCase

from catalogue.models import Template


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
            raise OperationalError("deadlock detected\nDETAIL:  Process 1 waits for "
                                   "AccessExclusiveLock on relation 2; blocked by process 3.")
        return original(self, sql_list)

    monkeypatch.setattr(operations, "execute_sql_flush", deadlocked_once)
    TransactionTestCase("run")._fixture_teardown()
    assert len(tries) == 2 and tries[1] > 0
    assert Template.objects.filter(slug="jupyter").exists()  # the seeded rows put back


@pytest.mark.django_db(transaction=True)
def test_other_flush_failures_are_not_hidden(monkeypatch):
    from django.core.management.base import CommandError

    def broken(self, sql_list):
        raise OperationalError("relation does not exist")

    monkeypatch.setattr(type(connection.ops), "execute_sql_flush", broken)
    with pytest.raises(CommandError):
        TransactionTestCase("run")._fixture_teardown()
    monkeypatch.undo()
    TransactionTestCase("run")._fixture_teardown()  # the database back as the next test expects
