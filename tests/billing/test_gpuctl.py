"""`gpuctl price …` and `gpuctl report …` against the live portal and the real Keystone: an
admin sets prices (a member may read them, not set them: exit 1), the project's manager reads
November's report as a table and as CSV, a member gets none (exit 1, forbidden), and an admin
closes the month."""

from __future__ import annotations

import csv
import io
import json

from django.test import override_settings

from billing.models import MonthClose
from tenants.models import Tenant
from tests.fixtures.factories import make_workload
from tests.support.billing import at
from tests.support.gpuctl import live, openrc, run


@live
@override_settings(TIME_ZONE="UTC")
def test_prices_and_the_monthly_report_from_the_command_line(keystone, live_server, gpu_types):
    lead = openrc(keystone, live_server, user="lead", project="vision-lab")
    researcher = openrc(keystone, live_server, user="researcher", project="vision-lab")
    admin = openrc(keystone, live_server, user="admin", project="admin")
    for env in (lead, researcher, admin):
        code, _, err = run(["whoami"], env)  # first contact records the users and tenants
        assert code == 0, err
    make_workload(Tenant.objects.get(name="vision-lab"), "researcher", gpu_type="a100",
                  gpu_count=2, state="succeeded", started_at=at(3, 10),
                  finished_at=at(3, 16, 30))
    code, out, err = run(["price", "set", "--from", "2025-01-01", "--gpu", "a100=2.3456",
                          "--cpu-hour", "0.0125"], admin)
    assert code == 0, err
    assert "2025-01-01 (in force)" in out and "a100 2.3456" in out
    code, _, err = run(["price", "set", "--gpu", "a100=1"], researcher)
    assert code == 1 and "permission_denied" in err
    code, out, err = run(["price", "-o", "json"], researcher)
    assert code == 0, err
    assert json.loads(out)["in_force"]["gpu"] == {"a100": "2.3456"}

    code, out, err = run(["report", "usage", "--period", "2025-11", "--by", "tenant"], lead)
    assert code == 0, err
    # 13 GPU-hours × 2.3456 = 30.49; 26 CPU-hours × 0.0125 = 0.325 → 0.33 (half up)
    assert "vision-lab" in out and "30.82" in out and "open: worked out now" in out
    code, out, err = run(["report", "usage", "--period", "2025-11", "--by", "tenant", "--csv"],
                         lead)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert (rows[0]["tenant"], rows[0]["gpu_hours_a100"], rows[0]["gpu_cost"],
            rows[0]["cpu_cost"], rows[0]["cost"]) == ("vision-lab", "13.0000", "30.49", "0.33",
                                                      "30.82")
    code, _, err = run(["report", "usage", "--period", "2025-11"], researcher)
    assert code == 1 and "permission_denied" in err

    code, out, err = run(["report", "close", "2025-11"], admin)
    assert code == 0, err
    assert "2025-11 closed" in out and MonthClose.objects.filter(month__year=2025).exists()
    code, out, err = run(["report", "months"], admin)
    assert code == 0, err
    assert "2025-11" in out
    code, out, err = run(["report", "usage", "--period", "2025-11", "--json"], lead)
    assert code == 0, err
    assert json.loads(out)["closed"] is True
    code, out, err = run(["report", "reopen", "2025-11", "--reason", "a late run"], admin)
    assert code == 0, err
    assert "2025-11 open again" in out and not MonthClose.objects.filter(month__year=2025).exists()
    code, _, err = run(["report", "reopen", "2025-11", "--reason", "twice"], admin)
    assert code == 1 and "month_not_closed" in err
