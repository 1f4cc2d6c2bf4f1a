"""The file servers' tasks: the beat's stop of those no one used for PORTAL_FILES_IDLE_MINUTES,
and one project's stop, sent by name (core.tasks.send_on_commit) by whoever takes a claim away
from under it (a volume deleted: its claim is not released while the server's pod mounts it)."""

from __future__ import annotations

from core.tasks import task
from kube.client import KubeError

from .server import file_server_stop, file_servers_stop_idle


@task(ignore_result=True, soft_time_limit=50, time_limit=55)
def files_stop_idle_task() -> None:
    file_servers_stop_idle()


@task(ignore_result=True, autoretry_for=(KubeError,), retry_backoff=2, retry_backoff_max=60,
      max_retries=5)
def file_server_stop_task(namespace: str) -> None:
    file_server_stop(namespace)
