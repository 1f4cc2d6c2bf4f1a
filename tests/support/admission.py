"""A launch admitted through the portal's own service, as the API's serializer hands it over."""

from __future__ import annotations

from catalogue.models import Template
from workloads.models import Workload
from workloads.services import workload_launch


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
