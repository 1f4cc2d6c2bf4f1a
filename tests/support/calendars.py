"""Reservations: a booking at a fixed time, far enough ahead for every clock the tests set."""

from __future__ import annotations

import datetime as dt
import uuid

from calendars.models import Reservation
from calendars.services import reservation_create
from catalogue.models import Template
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update, tenant_ensure
from workloads.models import Workload
from workloads.services import workload_launch

START = dt.datetime(2030, 3, 4, 9, 0, tzinfo=dt.UTC)
END = START + dt.timedelta(hours=8)


def book(tenant, gpu_types, *, count: int = 4, start: dt.datetime = START,
         end: dt.datetime = END, user=None, **fields) -> Reservation:
    """A reservation booked now (an hour before START unless the clock says otherwise)."""
    return reservation_create(tenant=tenant, acting_user=user, within_allowance=False,
                              fields={"gpu_type": gpu_types["a100"], "count": count,
                                      "start": start, "end": end, "note": "", **fields})


def make_tenant(name: str, *, a100: int = 2, gpus_total: int = 2, reconcile: bool = True):
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=name)
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": gpus_total, "max_workloads": 10, "cpu": 16, "memory_gb": 64,
        "gpus_by_type": {"a100": a100, "v100": 0, "t4": 0}})
    if reconcile:
        tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    return tenant


def launch(tenant, user, gpu_types, *, name: str, gpus: int) -> Workload:
    request = {"template": Template.objects.get(slug="custom"), "name": name, "kind": "batch",
               "gpu_type": gpu_types["a100"], "gpu_count": gpus, "image": "busybox:1.36",
               "env": {"KUBESIM_RUN_SECONDS": "600"}, "cpu": 1, "memory": 1}
    workload, _ = workload_launch(tenant=tenant, user=user, request=request)
    return workload
