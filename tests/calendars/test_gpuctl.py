"""`gpuctl reservations`, `gpuctl maintenance` and `gpuctl calendar` against the live portal,
the real Keystone and kubesim (16 a100 GPUs): an admin announces a window and books for a
project, a manager books within the allowance, a member lists and reads the timeline, an
overbooking and a member's booking are refused with the API's reason."""

from __future__ import annotations

import datetime as dt
import json
import re

from django.utils import timezone

from calendars.models import MaintenanceWindow, Reservation, ReservationAllowance
from gpuctl.parser import when
from tenants.models import Tenant
from tests.support.gpuctl import live, openrc, portal, run  # noqa: F401 - the fixture


def iso(hours: float) -> str:
    return (timezone.now() + dt.timedelta(hours=hours)).replace(
        minute=0, second=0, microsecond=0).isoformat()


def test_a_time_without_a_zone_is_local():
    assert when("2026-12-01T09:00Z") == "2026-12-01T09:00:00+00:00"
    assert dt.datetime.fromisoformat(when("2026-12-01T09:00")).tzinfo is not None


@live
def test_the_calendar_through_gpuctl(portal, keystone, live_server):  # noqa: F811
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["maintenance", "create", "--gpu-type", "a100", "--start", iso(26),
                          "--end", iso(30), "--reason", "driver update", "--drain", "--json"],
                         admin)
    assert code == 0, err
    window = json.loads(out)
    assert window["covers"] == "every a100 node" and window["drain"] is True
    assert sorted(window["affected"]) == ["gpu-a100-1", "gpu-a100-2"]
    code, out, err = run(["reservations", "create", "--tenant", "vision-lab", "--gpu-type",
                          "a100", "--count", "4", "--start", iso(22), "--end", iso(26),
                          "--note", "course lab"], admin)
    assert code == 0, err
    assert "vision-lab" in out and "course lab" in out
    booked = Reservation.objects.get()
    assert (booked.tenant.name, booked.count) == ("vision-lab", 4)

    # a member sees both; cannot book
    code, out, err = run(["reservations"], portal)
    assert code == 0, err
    assert "course lab" in out and f"\n{booked.pk} " in out
    assert "are put back in line (batch jobs) or stopped (services)" in out  # at the end
    code, out, err = run(["maintenance", "list"], portal)
    assert code == 0, err
    assert "driver update" in out and "every a100 node" in out
    code, out, err = run(["calendar", "--gpu-type", "a100", "--since", iso(0),
                          "--until", iso(48)], portal)
    assert code == 0, err
    assert out.startswith("a100: 16 GPUs in service")
    assert "course lab" in out and "driver update" in out
    # the reservation's stretch, then the window's
    rows = [line.split()[2:5] for line in out.splitlines()]
    assert ["4", "0", "12"] in rows and ["0", "16", "0"] in rows, out
    code, out, err = run(["calendar", "--gpu-type", "a100", "--json"], portal)
    assert code == 0, err
    assert json.loads(out)["capacity"] == 16
    # the GPU types say it too, to another project (the window begins after 24 h): the
    # reservation; vision-lab's own member is not told of its own
    code, out, err = run(["gpu-types"], admin)
    assert code == 0, err
    a100 = next(line for line in out.splitlines() if line.startswith("a100 "))
    assert re.search(r" 8 +12 from [^,]+ \(reserved\)$", a100.rstrip()), out  # 4 of 16
    code, out, err = run(["gpu-types"], portal)
    assert next(line for line in out.splitlines() if line.startswith("a100 ")).rstrip() \
        .endswith(" 8"), out
    code, _, err = run(["reservations", "create", "--gpu-type", "a100", "--count", "1",
                        "--start", iso(50), "--end", iso(51)], portal)
    assert code == 1 and "permission" in err.lower()

    # a manager within the allowance; an overbooking refused with what is left
    ReservationAllowance.objects.create(tenant=Tenant.objects.get(name="vision-lab"),
                                        gpu_hours=100)
    lead = openrc(keystone, live_server, user="lead", project="vision-lab")
    code, out, err = run(["reservations", "create", "--gpu-type", "a100", "--count", "2",
                          "--start", iso(50), "--end", iso(52), "--weekly", "--until",
                          iso(24 * 9), "--json"], lead)
    assert code == 0, err
    assert json.loads(out)["recurrence"] == "weekly"
    code, _, err = run(["reservations", "create", "--gpu-type", "a100", "--count", "1",
                        "--start", iso(27), "--end", iso(28)], lead)
    assert code == 1 and "overbooked" in err and "0 of its 16 a100 GPUs left" in err

    code, out, err = run(["reservations", "cancel", str(booked.pk)], lead)
    assert code == 0, err
    booked.refresh_from_db()
    assert booked.cancelled_at is not None
    code, _, err = run(["maintenance", "cancel", str(window["id"])], portal)
    assert code == 1  # a member
    code, _, err = run(["maintenance", "cancel", str(window["id"])], admin)
    assert code == 0, err
    assert MaintenanceWindow.objects.get().cancelled_at is not None
    code, _, err = run(["maintenance", "create", "--start", iso(26), "--end", iso(30),
                        "--reason", "x"], admin)
    assert code == 2 and "one of the arguments --nodes --selector --gpu-type is required" in err


@live
def test_a_relayout_through_gpuctl(portal, keystone, live_server):  # noqa: F811
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["maintenance", "create", "--nodes", "gpu-t4-shared-1", "--relayout",
                          "gpu-t4-shared-1=replicas:2", "--start", iso(26), "--end", iso(28),
                          "--reason", "halve the sharing", "--drain"], admin)
    assert code == 0, err
    assert "gpu-t4-shared-1: 16 × nvidia.com/gpu.shared → 8 × nvidia.com/gpu.shared " \
        "(time-sliced 2 ways)" in out
    window = MaintenanceWindow.objects.get()
    assert window.relayout == {"gpu-t4-shared-1": {"replicas": 2}}
    code, out, err = run(["maintenance", "show", str(window.pk), "--json"], admin)
    assert code == 0, err
    assert json.loads(out)["relayout_plan"]["nodes"]["gpu-t4-shared-1"].endswith(
        "(time-sliced 2 ways)")
    code, out, err = run(["maintenance", "create", "--nodes", "gpu-t4-shared-1", "--relayout",
                          "gpu-t4-shared-1=all-1g.10gb", "--start", iso(26), "--end", iso(28),
                          "--reason", "carve", "--drain"], admin)
    assert code != 0
    assert "cannot be partitioned with MIG" in err
