"""A launch admitted through the portal's own service, as the API's serializer hands it over."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

from catalogue.models import Template
from workloads.models import Workload
from workloads.services import AdmissionRefused, workload_launch


def admitted(tenant, user, template: Template, gpu_type, **request) -> Workload:
    """workload_launch with LaunchSerializer's data; its create task has not run (the test's
    transaction never commits, so nothing on_commit is sent)."""
    body = {"name": request.pop("name", template.slug), "template": template,
            "kind": template.kind, "gpu_type": gpu_type, "gpu_count": 1,
            "image": template.image, "command": [], "args": [], "env": {},
            "port": template.port, "cpu": 1, "memory": 1, **request}
    workload, created = workload_launch(tenant=tenant, user=user, request=body)
    assert created and workload.state == Workload.State.SUBMITTED
    return workload


def all_at_once(calls: list[Callable[[], Any]], *, refused: type[Exception] = AdmissionRefused
                ) -> tuple[list[Any], list[str], list[str]]:
    """Each call in a thread of its own, all released together (each with its own database
    connection, closed after): (their answers, the messages of those refused with `refused`,
    any other failure)."""
    barrier = threading.Barrier(len(calls))
    answers: list[Any] = []
    refusals: list[str] = []
    errors: list[str] = []

    def attempt(call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            answers.append(call())
        except refused as exc:
            refusals.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - any other failure is the caller's to judge
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers, refusals, errors
