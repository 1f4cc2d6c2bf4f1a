"""The tracker's tests: tenants with a namespace of their own, workloads launched straight
into the cluster, and the tracker run until a condition holds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from catalogue.models import Template
from identity.models import User
from kube.client import Kube
from kube.labels import workload_object_name
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update, tenant_ensure
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.objects import workload_objects_create
from workloads.tracking.tracker import Tracker

S = Workload.State


def make_tenant(*, gpus: int = 16, per_type: int = 8):
    """A provisioned tenant of a fresh project (so a fresh namespace) with a quota of `gpus`,
    `per_type` of each GPU type."""
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Vision Lab {uuid.uuid4().hex[:6]}")
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": gpus, "max_workloads": 40,
        "gpus_by_type": {"a100": per_type, "v100": per_type, "t4": per_type}})
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    return tenant


@pytest.fixture
def tenants(gpu_types, cluster):
    """Tenants made by the test, each with a namespace of its own (`cluster` deletes them
    afterwards, pods and GPUs with them, and waits until they are gone)."""
    return make_tenant


@pytest.fixture
def owner(db):
    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def launch(tenant, owner, gpu_types, *, name: str = "job", template: str = "custom",
           kind: str = "batch", gpu: str = "a100", count: int = 1,
           image: str = "busybox:1.36", env: dict | None = None, create: bool = True,
           **extra) -> Workload:
    tpl = Template.objects.get(slug=template)
    workload = Workload.objects.create(
        tenant=tenant, owner=owner, name=name, template=tpl, kind=kind,
        gpu_type=gpu_types[gpu], gpu_count=count, image=image if template == "custom" else tpl.image,
        env=env or {}, port=tpl.port, cpu=1, memory_gb=1, state=S.CREATING,
        access_token="t" * 43 if tpl.token_env else "", **extra)
    workload.object_name = workload_object_name(workload.pk, name)
    workload.save(update_fields=["object_name"])
    if create:
        workload_objects_create(workload)
        Workload.objects.filter(pk=workload.pk).update(state=S.PENDING)
    return workload


def track_until(tracker: Tracker, done: Callable[[], bool], *, timeout: float = 20.0,
                step: float = 1.5, describe: Callable[[], str] | None = None) -> None:
    """Run the tracker in short runs until `done()`; bounded. `describe` says where things stand
    when it times out. A run is `run_for`'s term of `step` seconds, only it ends at the first of
    its steps after which `done()` holds: a full term more is latency, nothing the condition
    needs (the stop still writes what came and stores the cursors)."""
    def cycled() -> bool:
        tracker.start()
        try:
            deadline = time.monotonic() + step
            while (left := deadline - time.monotonic()) > 0:
                tracker.step(min(left, 0.2))  # a step waits for changes: no pause
                if done():
                    break
        finally:
            tracker.stop()
        return done()

    if done():
        return
    eventually(cycled, timeout=timeout, interval=0,
               message=lambda: "tracking did not get there in time"
               + (f" ({describe()})" if describe else ""))


def state_of(workload: Workload) -> Workload:
    workload.refresh_from_db()
    return workload


def counting_kube(server) -> tuple[Kube, list[tuple[str, str]]]:
    """A Kube whose every HTTP request to the API server is recorded (method, path)."""
    api = server.api_client()
    calls: list[tuple[str, str]] = []
    original = api.rest_client.request

    def request(method, url, *args, **kwargs):
        calls.append((method, url.split("?")[0].split("//", 1)[-1].split("/", 1)[-1]))
        return original(method, url, *args, **kwargs)

    api.rest_client.request = request
    return Kube(api), calls
