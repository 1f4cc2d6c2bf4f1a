"""Migrating the test database to a point of its history and back (the data migrations'
tests: tests/<app>/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; the apps (historical models) as the database then is: the targets'
    and every other app where it stayed (a model of an app the targets do not need, at an older
    state, would leave out columns the database has and must fill).

    That is the state the executor returns: forwards, the one it has rendered while applying
    (building it again from the migrations and rendering it once more took a second a call);
    backwards, the applied migrations' state from the one before the last migration undone."""
    return MigrationExecutor(connection).migrate(targets).apps


def latest() -> list[tuple[str, str]]:
    """Every app's last migration: where a test migrates back to at its end."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
