"""The beat's task: stop the file servers no one used for PORTAL_FILES_IDLE_MINUTES."""

from __future__ import annotations

from core.tasks import task

from .server import file_servers_stop_idle


@task(ignore_result=True, soft_time_limit=50, time_limit=55)
def files_stop_idle_task() -> None:
    file_servers_stop_idle()
