"""`gpuctl budget` against the live portal and the real Keystone: an admin sets it, a member
reads it (used, remaining, percent, forecast, reset, top users) and may not set it; a launch
refused by the budget exits as a quota refusal does."""

from __future__ import annotations

import datetime as dt
import json

from django.contrib.auth import get_user_model
from django.utils import timezone

from budgets.models import Budget
from budgets.periods import period_bounds
from tenants.models import Tenant
from tests.budgets.conftest import run as run_workload
from tests.support.gpuctl import live, openrc, portal, run  # noqa: F401 - the fixture


@live
def test_an_admin_sets_the_budget_and_a_member_reads_it(portal, keystone, live_server):  # noqa: F811
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["budget", "set", "--project", "vision-lab", "--gpu-hours", "0.02",
                          "--period", "month", "--weight", "a100=2", "--weight", "t4=0.25",
                          "--hard", "--warn-at", "50,80,100", "--user-cap", "researcher=40"],
                         admin)
    assert code == 0, err
    assert "tenant vision-lab: hard budget of 0.02 weighted GPU-hours per month" in out
    budget = Budget.objects.get(tenant__name="vision-lab")
    researcher = get_user_model().objects.get(name="researcher")
    assert (budget.weights, budget.hard, budget.user_caps) == (
        {"a100": 2.0, "t4": 0.25}, True, {researcher.username: 40.0})

    # a minute of one a100 (weight 2) this period, by the researcher
    now = timezone.now()
    start = max(period_bounds("month", now)[0], now - dt.timedelta(minutes=1))
    run_workload(Tenant.objects.get(name="vision-lab"),
                 researcher, start=start, end=now)
    code, out, err = run(["budget", "-o", "json"], portal)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["tenant"] == "vision-lab" and shown["hard"] is True
    assert shown["used"] > 0 and shown["by_user"][0]["user"] == "researcher"
    assert shown["by_user"][0]["user_id"] == researcher.username
    assert shown["by_user"][0]["cap"] == 40.0
    code, out, err = run(["budget"], portal)
    assert code == 0, err
    for label in ("used", "remaining", "percent", "forecast", "resets_at", "top users:",
                  "researcher"):
        assert label in out

    # a member may not set it
    code, _, err = run(["budget", "set", "--gpu-hours", "1000"], portal)
    assert code == 1 and "permission_denied" in err
    assert Budget.objects.get(tenant__name="vision-lab").gpu_hours == budget.gpu_hours


@live
def test_a_launch_refused_by_the_budget_exits_4(portal, keystone, live_server):  # noqa: F811
    tenant = Tenant.objects.get(name="vision-lab")
    Budget.objects.create(tenant=tenant, gpu_hours=0, hard=True)
    code, _, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100"], portal)
    assert code == 4
    assert "budget_exhausted" in err and "launches are refused until" in err
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["budget", "remove", "--project", "vision-lab"], admin)
    assert code == 0, err
    assert "tenant vision-lab: no budget" in out
    assert not Budget.objects.exists()
