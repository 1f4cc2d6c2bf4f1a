"""With Kueue on the real control plane: a hard budget used up holds the tenant's ClusterQueue
(stopPolicy Hold: what is admitted runs on, nothing new is admitted, nothing borrowed) and the
hold is lifted at the period's reset (the time moved with time-machine)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.test import TestCase
from django.utils import timezone

from budgets.models import Budget
from budgets.periods import period_bounds
from budgets.services import budget_check
from kube.client import Kube
from tests.budgets.conftest import run
from tests.support.kueue import make_tenant, queued_cluster  # noqa: F401
from tests.support.waiting import eventually

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]


def active(kube: Kube, name: str) -> tuple[str, str]:
    """(its stopPolicy, "status/reason" of its Active condition; "" before Kueue wrote one)."""
    queue = kube.get("ClusterQueue", name)
    condition = next((c for c in (queue.get("status") or {}).get("conditions") or []
                      if c["type"] == "Active"), None)
    return (queue["spec"].get("stopPolicy", "None"),
            f"{condition['status']}/{condition['reason']}" if condition else "")


def test_an_exhausted_hard_budget_holds_the_queue_and_the_reset_lifts_it(
        queued_cluster, kueue_cluster, eager_celery):  # noqa: F811 - the fixture imported above
    from identity.models import User

    tenant = make_tenant(queued_cluster, a100=4)
    owner = User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")
    now = timezone.now()
    start, reset = period_bounds("month", now)
    # two a100 for up to an hour (inside this period): more than the hard budget
    run(tenant, owner, start=max(start, now - dt.timedelta(hours=1)), end=now, gpus=2)
    budget = Budget.objects.create(tenant=tenant, gpu_hours=0.01, hard=True)
    with kueue_cluster.api_client() as client:
        kube = Kube(client)
        eventually(lambda: active(kube, tenant.namespace) == ("None", "True/Ready"),
                   timeout=60, message="the tenant's queue never became active")
        with TestCase.captureOnCommitCallbacks(execute=True):  # the reconcile, eagerly
            assert budget_check(budget_id=budget.pk).held is True
        assert kube.get("ClusterQueue", tenant.namespace)["spec"]["stopPolicy"] == "Hold"
        eventually(lambda: active(kube, tenant.namespace) == ("Hold", "False/Stopped"),
                   timeout=60, message="Kueue never stopped the held queue")
        # the next period: the budget starts again from zero, the hold goes
        with time_machine.travel(reset + dt.timedelta(minutes=1), tick=True), \
                TestCase.captureOnCommitCallbacks(execute=False) as reconcile:
            assert budget_check(budget_id=budget.pk).held is False
        for callback in reconcile:
            callback()
        eventually(lambda: active(kube, tenant.namespace) == ("None", "True/Ready"),
                   timeout=60, message="the hold was never lifted")
