"""Fixtures of the budget tests: tenants, users and workloads made in the database (no
Keystone), the time frozen mid-November 2026 (time-machine)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import time_machine
from django.contrib.auth import get_user_model

from budgets.models import Budget
from tenants.models import Tenant
from tests.fixtures import factories
from workloads.models import Workload

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def clock():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def tenants(db, gpu_types) -> dict[str, Tenant]:
    made = {}
    for name in ("vision-lab", "nlp-lab"):
        made[name] = factories.make_tenant(name, gpus_total=64, cpu=256, memory_gb=1024,
                                           max_workloads=100)
    return made


@pytest.fixture
def users(db):
    model = get_user_model()
    return {name: model.objects.create(username=name, keystone_user_id=f"id-{name}")
            for name in ("ann", "bob")}


def run(tenant: Tenant, owner, *, start: dt.datetime, end: dt.datetime | None = None,
        gpu_type: str = "a100", gpus: int = 1, nodes: int = 1, name: str = "train") -> Workload:
    """A workload that ran from `start` to `end` (None: runs still)."""
    state = Workload.State.RUNNING if end is None else Workload.State.SUCCEEDED
    return factories.make_workload(tenant, owner, name=name, gpu_type=gpu_type, gpu_count=gpus,
                                   nodes=nodes, state=state, started_at=start, finished_at=end)


def budget(tenant: Tenant, hours: float, **fields) -> Budget:
    return Budget.objects.create(tenant=tenant, gpu_hours=Decimal(str(hours)), **fields)
