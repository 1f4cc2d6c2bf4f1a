"""The calendar's API: reservations (admins book for any tenant, managers for theirs within the
allowance; overbooking is a 409 that writes nothing; another tenant's is a 404), maintenance
windows (admins write, everyone signed in reads), the allowance, and a GPU type's calendar
(another tenant's booking shown without its name). The cluster is kubesim with the demo
inventory: 16 a100 GPUs on gpu-a100-1 and gpu-a100-2 (8 each)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client, TestCase

from audit.models import AuditRecord
from calendars.models import MaintenanceWindow, Reservation, ReservationAllowance
from tenants.models import Tenant
from tests.support.cluster import cluster_cache_caught_up

pytestmark = pytest.mark.django_db

# before the real date: Keystone's real tokens are valid at it
NOW = dt.datetime(2026, 11, 20, 8, 0, tzinfo=dt.UTC)


def at(days: float = 0, hours: float = 0) -> str:
    return (NOW + dt.timedelta(days=days, hours=hours)).isoformat()


@pytest.fixture(autouse=True)
def clock():
    with time_machine.travel(NOW, tick=True):
        yield


@pytest.fixture
def tenants(login, gpu_types, cluster) -> dict[str, Tenant]:
    login("researcher")  # a member of vision-lab and nlp-lab: both tenants recorded
    return {t.name: t for t in Tenant.objects.all()}


@pytest.fixture
def caller(project_token):
    tokens: dict[tuple[str, str], str] = {}

    def _call(user: str, method: str, url: str, body=None, project: str = "vision-lab"):
        key = (user, project)
        if key not in tokens:
            tokens[key] = project_token(user, project)
        client = Client(HTTP_X_AUTH_TOKEN=tokens[key])
        with TestCase.captureOnCommitCallbacks(execute=False):
            if method in ("get", "delete"):
                return getattr(client, method)(url)
            return getattr(client, method)(url, body, content_type="application/json")

    return _call


def booking(tenant: Tenant | None = None, **fields) -> dict:
    body = {"gpu_type": "a100", "count": 4, "start": at(1), "end": at(1, 8), "note": "course"}
    if tenant is not None:
        body["tenant"] = tenant.pk
    return {**body, **fields}


def test_an_admin_books_for_a_tenant_whose_people_see_it_and_others_do_not(tenants, caller):
    vision = tenants["vision-lab"]
    response = caller("admin", "post", "/api/v1/reservations/", booking(vision), project="admin")
    assert response.status_code == 201, response.json()
    made = response.json()
    assert (made["tenant"], made["gpu_type"], made["count"], made["state"]) == \
        (vision.pk, "a100", 4, "upcoming")
    assert made["next_occurrence"]["start"].startswith("2026-11-21T08:00")
    # what its end does to the workloads beyond the quota, as the booking page says it
    assert made["end_grace_minutes"] == 10
    assert made["at_end"].endswith("10 minutes later those still beyond it are put back in "
                                   "line (batch jobs) or stopped (services).")
    record = AuditRecord.objects.get(action="reservation.create")
    assert record.tenant_id == vision.pk and record.after["count"] == 4
    listed = caller("viewer", "get", "/api/v1/reservations/").json()
    assert [r["id"] for r in listed["results"]] == [made["id"]]
    assert caller("student", "get", "/api/v1/reservations/", project="nlp-lab").json()["results"] == []
    assert caller("student", "get", f"/api/v1/reservations/{made['id']}/",
                  project="nlp-lab").status_code == 404
    # a tenant filter of digits Python reads but the database does not: ignored, no error
    assert caller("admin", "get", "/api/v1/reservations/?tenant=\u0663",
                  project="admin").status_code == 200


def test_an_overbooking_is_a_409_that_writes_nothing(tenants, caller):
    vision, nlp = tenants["vision-lab"], tenants["nlp-lab"]
    first = caller("admin", "post", "/api/v1/reservations/", booking(vision, count=10),
                   project="admin")
    assert first.status_code == 201
    over = caller("admin", "post", "/api/v1/reservations/",
                  booking(nlp, count=7, start=at(1, 4), end=at(1, 12)), project="admin")
    assert over.status_code == 409
    body = over.json()
    assert body["code"] == "overbooked"
    assert "6 of its 16 a100 GPUs left" in body["detail"] and "10 reserved" in body["detail"]
    assert Reservation.objects.count() == 1
    assert AuditRecord.objects.filter(action="reservation.create").count() == 1
    # the same GPUs after the first one ends fit
    after = caller("admin", "post", "/api/v1/reservations/",
                   booking(nlp, count=7, start=at(1, 8), end=at(1, 12)), project="admin")
    assert after.status_code == 201
    # six more fit beside the ten
    assert caller("admin", "post", "/api/v1/reservations/",
                  booking(nlp, count=6, start=at(1, 1), end=at(1, 2)),
                  project="admin").status_code == 201


def test_a_maintenance_window_leaves_less_to_book(tenants, caller):
    window = caller("admin", "post", "/api/v1/maintenance-windows/",
                    {"nodes": ["gpu-a100-1"], "start": at(1, 2), "end": at(1, 6),
                     "reason": "driver update", "drain": True}, project="admin")
    assert window.status_code == 201, window.json()
    assert window.json()["affected"] == {"gpu-a100-1": {"gpu_type": "a100", "gpus": 8}}
    refused = caller("admin", "post", "/api/v1/reservations/",
                     booking(tenants["vision-lab"], count=9), project="admin")
    assert refused.status_code == 409
    assert "8 in maintenance" in refused.json()["detail"]
    assert caller("admin", "post", "/api/v1/reservations/",
                  booking(tenants["vision-lab"], count=8), project="admin").status_code == 201


def test_weekly_reservations_book_every_occurrence(tenants, caller):
    vision, nlp = tenants["vision-lab"], tenants["nlp-lab"]
    weekly = caller("admin", "post", "/api/v1/reservations/",
                    booking(vision, count=12, recurrence="weekly", until=at(30)), project="admin")
    assert weekly.status_code == 201, weekly.json()
    # the third week's occurrence collides
    third = caller("admin", "post", "/api/v1/reservations/",
                   booking(nlp, count=5, start=at(15, 2), end=at(15, 3)), project="admin")
    assert third.status_code == 409 and "2026-12-05 10:00" in third.json()["detail"]
    # between occurrences it is free
    assert caller("admin", "post", "/api/v1/reservations/",
                  booking(nlp, count=16, start=at(4), end=at(5)),
                  project="admin").status_code == 201


def test_managers_book_within_the_allowance_that_admins_set(tenants, caller):
    vision = tenants["vision-lab"]
    url = f"/api/v1/tenants/{vision.pk}/reservation-allowance/"
    refused = caller("lead", "post", "/api/v1/reservations/", booking())
    assert refused.status_code == 403 and refused.json()["code"] == "reservation_allowance"
    assert caller("lead", "put", url, {"gpu_hours": 100}).status_code == 403
    assert caller("admin", "put", url, {"gpu_hours": 40, "max_days_ahead": 14},
                  project="admin").json() == {"gpu_hours": 40, "max_days_ahead": 14}
    assert caller("viewer", "get", url).json()["gpu_hours"] == 40
    assert AuditRecord.objects.filter(action="reservation.allowance").count() == 1
    made = caller("lead", "post", "/api/v1/reservations/", booking())  # 4 × 8 h = 32
    assert made.status_code == 201, made.json()
    beyond = caller("lead", "post", "/api/v1/reservations/",
                    booking(count=2, start=at(3), end=at(3, 5)))  # 10 more: 42 > 40
    assert beyond.status_code == 403 and "holds 32.0" in beyond.json()["detail"]
    too_far = caller("lead", "post", "/api/v1/reservations/",
                     booking(count=1, start=at(20), end=at(20, 1)))
    assert too_far.status_code == 403 and "14 days ahead" in too_far.json()["detail"]
    other = caller("lead", "post", "/api/v1/reservations/",
                   booking(tenants["nlp-lab"], count=1))
    assert other.status_code == 404
    # a member may not book, nor cancel; the manager cancels
    member = caller("researcher", "post", "/api/v1/reservations/", booking(count=1))
    assert member.status_code == 403
    rid = made.json()["id"]
    assert caller("researcher", "delete", f"/api/v1/reservations/{rid}/").status_code == 403
    assert caller("lead", "delete", f"/api/v1/reservations/{rid}/").status_code == 204
    assert Reservation.objects.get(pk=rid).cancelled_at is not None
    assert AuditRecord.objects.filter(action="reservation.cancel").count() == 1
    assert caller("lead", "get", "/api/v1/reservations/").json()["results"] == []
    assert ReservationAllowance.objects.get(tenant=vision).gpu_hours == 40
    # what an admin books for the project is not the managers' allowance
    assert caller("admin", "post", "/api/v1/reservations/", booking(vision, count=8, start=at(5),
                                                                   end=at(6)),
                  project="admin").json()["against_allowance"] is False
    again = caller("lead", "post", "/api/v1/reservations/", booking())  # 32 of 40 again
    assert again.status_code == 201 and again.json()["against_allowance"] is True


@pytest.mark.parametrize("fields, field", [
    ({"count": 0}, "count"),
    ({"start": at(-1), "end": at(-1, 2)}, "start"),
    ({"end": at(0, 1), "start": at(0, 2)}, "end"),
    ({"start": "2026-12-02T09:00:00"}, "start"),
    ({"recurrence": "weekly"}, "until"),
    ({"recurrence": "daily"}, "recurrence"),
    ({"gpu_type": "h900"}, "gpu_type"),
    ({"note": "a\u202eb"}, "note"),
    ({"colour": "red"}, "colour"),
])
def test_bad_bookings_are_400s_naming_the_field(tenants, caller, fields, field):
    response = caller("admin", "post", "/api/v1/reservations/",
                      booking(tenants["vision-lab"], **fields), project="admin")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid" and field in response.json()["fields"]
    assert not Reservation.objects.exists()


def test_admins_announce_and_cancel_windows_that_everyone_sees(tenants, caller):
    body = {"gpu_type": "a100", "start": at(2), "end": at(2, 4), "reason": "firmware"}
    assert caller("lead", "post", "/api/v1/maintenance-windows/", body).status_code == 403
    made = caller("admin", "post", "/api/v1/maintenance-windows/", body, project="admin")
    assert made.status_code == 201
    window = made.json()
    assert sorted(window["affected"]) == ["gpu-a100-1", "gpu-a100-2"]
    assert window["covers"] == "every a100 node" and window["state"] == "announced"
    seen = caller("student", "get", "/api/v1/maintenance-windows/", project="nlp-lab").json()
    assert [w["id"] for w in seen["results"]] == [window["id"]]
    both = caller("admin", "post", "/api/v1/maintenance-windows/",
                  {**body, "nodes": ["gpu-a100-1"]}, project="admin")
    assert both.status_code == 400 and "nodes" in both.json()["fields"]
    assert caller("lead", "delete",
                  f"/api/v1/maintenance-windows/{window['id']}/").status_code == 403
    assert caller("admin", "delete", f"/api/v1/maintenance-windows/{window['id']}/",
                  project="admin").status_code == 204
    assert MaintenanceWindow.objects.get().cancelled_at is not None
    assert caller("student", "get", "/api/v1/maintenance-windows/",
                  project="nlp-lab").json()["results"] == []
    assert [r.action for r in AuditRecord.objects.filter(action__startswith="maintenance.")
            .order_by("id")] == \
        ["maintenance.announce", "maintenance.cancel"]


def test_the_calendar_shows_another_projects_booking_without_its_name(tenants, caller):
    vision = tenants["vision-lab"]
    caller("admin", "post", "/api/v1/reservations/", booking(vision, count=6), project="admin")
    caller("admin", "post", "/api/v1/maintenance-windows/",
           {"nodes": ["gpu-a100-2"], "start": at(1, 4), "end": at(1, 10), "reason": "PSU"},
           project="admin")
    url = f"/api/v1/calendar/?gpu_type=a100&since={at(1).replace('+00:00', 'Z')}" \
          f"&until={at(2).replace('+00:00', 'Z')}"
    theirs = caller("student", "get", url, project="nlp-lab").json()
    assert theirs["capacity"] == 16
    assert theirs["reservations"] == [{"id": None, "tenant": None, "count": 6,
                                       "start": "2026-11-21T08:00:00Z",
                                       "end": "2026-11-21T16:00:00Z", "note": "",
                                       "released": False}]
    assert [(s["reserved"], s["maintenance"], s["bookable"]) for s in theirs["segments"]] == \
        [(6, 0, 10), (6, 8, 2), (0, 8, 8), (0, 0, 16)]
    assert [w["reason"] for w in theirs["windows"]] == ["PSU"]
    ours = caller("researcher", "get", url).json()
    assert ours["reservations"][0]["tenant"] == "vision-lab"
    assert ours["reservations"][0]["note"] == "course"
    assert caller("researcher", "get", "/api/v1/calendar/?gpu_type=nope").status_code == 400


def test_the_gpu_types_say_what_the_calendar_changes_ahead(tenants, caller, login):
    cluster_cache_caught_up(("Node", "Pod"))  # an earlier test's pods gone from its copy too
    start = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)).replace(second=0, microsecond=0)
    caller("admin", "post", "/api/v1/maintenance-windows/",
           {"nodes": ["gpu-a100-1"], "start": start.isoformat(),
            "end": (start + dt.timedelta(hours=2)).isoformat(), "reason": "PSU"},
           project="admin")
    with time_machine.travel(dt.datetime.now(dt.UTC), tick=True):  # the real clock
        types = {t["slug"]: t for t in caller("student", "get", "/api/v1/gpu-types/",
                                               project="nlp-lab").json()}
        page = login("admin", "admin-demo-pass").get("/admin/gpu-types/").content.decode()
    a100 = types["a100"]["upcoming"]
    assert a100["free_now"] == 16
    assert [(c["free"], c["why"]) for c in a100["changes"]] == \
        [(8, "maintenance"), (16, "maintenance ends")]
    assert a100["text"].startswith("16 a100 free now, 8 from ")
    assert types["v100"]["upcoming"]["changes"] == []
    assert a100["text"] in page.replace("&#x27;", "'")


def test_a_window_carries_a_relayout_planned_when_announced_and_refused_in_words(
        tenants, caller):
    cluster_cache_caught_up()
    body = {"nodes": ["gpu-a100-mig-1"], "start": at(2), "end": at(2, 4),
            "reason": "re-carve", "drain": True,
            "relayout": {"gpu-a100-mig-1": {"mig_config": "all-3g.40gb"}}}
    made = caller("admin", "post", "/api/v1/maintenance-windows/", body, project="admin")
    assert made.status_code == 201, made.json()
    window = made.json()
    assert window["relayout"] == {"gpu-a100-mig-1": {"mig_config": "all-3g.40gb"}}
    assert window["relayout_plan"]["nodes"] == {
        "gpu-a100-mig-1": "gpu-a100-mig-1: 14 × 1g.10gb → 4 × 3g.40gb (MIG all-3g.40gb)"}
    assert window["relayout_state"] == {}
    plain = caller("admin", "post", "/api/v1/maintenance-windows/",
                   {**body, "relayout": None, "nodes": ["gpu-a100-1"]}, project="admin")
    assert plain.status_code == 201 and plain.json()["relayout_plan"] is None
    refused = caller("admin", "post", "/api/v1/maintenance-windows/",
                     {**body, "relayout": {"gpu-a100-mig-1": {"mig_config": "all-2g.10gb"}}},
                     project="admin")
    assert refused.status_code == 400
    assert refused.json()["fields"]["relayout"] == [
        "gpu-a100-mig-1: A A100/H100 80GB GPU has no MIG layout 'all-2g.10gb': one of "
        "all-1g.10gb, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, all-7g.80gb, "
        "all-balanced or all-disabled."]
    assert caller("lead", "post", "/api/v1/maintenance-windows/", body).status_code == 403
