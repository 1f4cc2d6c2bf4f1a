"""What the database benchmarks share: a PostgreSQL server of their own in a temporary folder
(fsync off unless durable, as the tests run it), and the portal's Django on it, migrated."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def start_postgres(workdir: Path, durable: bool = False) -> Any:
    from stack.postgres import PostgresServer
    from stack.procs import free_port

    os.chmod(workdir, 0o755)
    server = PostgresServer(workdir / "pg", free_port())
    server.start(workdir / "postgres.log", durable=durable)
    return server


def portal_django(database_url: str, **env: str) -> None:
    """Set up the portal's Django on `database_url` (with `env` over the bench defaults) and
    migrate it."""
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": database_url,
        "PORTAL_SECRET_KEY": "bench-" + "k" * 60, "PORTAL_TLS": "0",
        "PORTAL_LOG_LEVEL": "WARNING", **env,
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
