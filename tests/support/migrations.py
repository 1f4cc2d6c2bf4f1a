"""Migrating the test database to a point of its history and back (the data migrations'
tests: tests/<app>/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; the apps (historical models) as they are there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    """Every app's last migration: where a test migrates back to at its end."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
