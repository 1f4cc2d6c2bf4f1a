"""While maintenance takes GPUs out of service, the Kueue queues together admit no more than
the nodes left hold: each tenant's nominal quota of the type is lowered by its share of the
difference, and put back at the end (calendars.maintenance.queues_withhold). kubesim's demo
inventory: 16 a100 GPUs on gpu-a100-1 and gpu-a100-2."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import TestCase

from audit.models import AuditRecord
from calendars.maintenance import queues_withhold
from calendars.models import MaintenanceWindow
from calendars.timeline import shares
from tenants.models import Quota, Tenant
from tenants.queueing import queue_spec
from tenants.selectors import quota_figures
from tenants.services import quota_update
from tests.fixtures import factories

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def tenants(gpu_types, cluster):
    made = []
    for name, a100 in (("vision-lab", 10), ("nlp-lab", 6), ("idle-lab", 0)):
        made.append(factories.make_tenant(name, max_workloads=10,
                                          gpus_by_type={"a100": a100, "v100": 2, "t4": 0}))
    return made


def window(**fields) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        reason="driver update", start=NOW - dt.timedelta(minutes=5),
        end=NOW + dt.timedelta(hours=2), **fields)


def nominal(tenant: Tenant) -> dict[str, int]:
    return dict(queue_spec(tenant, Quota.objects.get(tenant=tenant)).gpus)


def test_shares_split_in_proportion_and_add_up():
    assert shares(8, {"a": 10, "b": 6, "c": 0}) == {"a": 5, "b": 3}
    assert shares(3, {"a": 1, "b": 1, "c": 1, "d": 1}) == {"a": 1, "b": 1, "c": 1}
    assert shares(50, {"a": 4, "b": 2}) == {"a": 4, "b": 2}  # never more than each has
    assert shares(0, {"a": 4}) == {} and shares(-3, {"a": 4}) == {}


def test_the_queues_are_lowered_to_what_stays_in_service_and_put_back(tenants):
    vision, nlp, idle = tenants
    window(nodes=["gpu-a100-1"], affected={"gpu-a100-1": {"gpu_type": "a100", "gpus": 8}})
    with time_machine.travel(NOW, tick=False), TestCase.captureOnCommitCallbacks(execute=False):
        # 16 in the queues, 8 left in service: 8 withheld, 5 and 3
        assert queues_withhold(NOW, queued=True) == {"gp-vision-lab": {"a100": 5},
                                                     "gp-nlp-lab": {"a100": 3}}
        assert (nominal(vision)["a100"], nominal(nlp)["a100"], nominal(idle)["a100"]) == \
            (5, 3, 0)
        assert nominal(vision)["v100"] == 2  # other types as they were
        assert queues_withhold(NOW, queued=True) == {}  # again: nothing changes
        record = AuditRecord.objects.filter(action="quota.adjust", tenant=vision).get()
        assert record.after["source"] == "maintenance"
        assert "8 a100 GPUs in maintenance, 8 in service" in record.after["reason"]
        later = NOW + dt.timedelta(hours=3)
        MaintenanceWindow.objects.update(state=MaintenanceWindow.State.ENDED)
        assert queues_withhold(later, queued=True) == {"gp-vision-lab": {}, "gp-nlp-lab": {}}
    assert (nominal(vision)["a100"], nominal(nlp)["a100"]) == (10, 6)


def test_nothing_is_withheld_while_the_nodes_left_hold_the_queues_or_without_kueue(tenants):
    vision, nlp, _ = tenants
    window(nodes=["gpu-a100-1"], affected={"gpu-a100-1": {"gpu_type": "a100", "gpus": 8}})
    with time_machine.travel(NOW, tick=False), TestCase.captureOnCommitCallbacks(execute=False):
        assert queues_withhold(NOW, queued=False) == {}  # no Kueue: admission is the portal's
        quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100": 2}})
        assert queues_withhold(NOW, queued=True) == {}  # 2 + 6 fit in the 8 left
        quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100": 3}})
        assert queues_withhold(NOW, queued=True) == {"gp-nlp-lab": {"a100": 1}}
    assert quota_figures(vision).adjustments == ()
