"""The calendar pages: a GPU type's two weeks for everyone in a project (other
projects' reservations unnamed but to admins), the booking form (managers within their
allowance, admins for any project; overbooking refused with the reason), the admin's
maintenance windows and allowances, the banner on the launch page and the dashboard, and the
launch check's capacity text. Real Keystone users, kubesim's nodes (16 a100 GPUs)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import TestCase
from django.utils import timezone

from audit.models import AuditRecord
from calendars.forms import local_input
from calendars.models import MaintenanceWindow, Reservation, ReservationAllowance
from catalogue.selectors import capacity_outlook, when_text
from tenants.models import Tenant
from tenants.services import quota_update
from tests.support.cluster import cluster_cache_caught_up

pytestmark = pytest.mark.django_db


def soon(hours: float) -> dt.datetime:
    return (timezone.now() + dt.timedelta(hours=hours)).replace(second=0, microsecond=0)


@pytest.fixture
def lab(login, gpu_types, cluster) -> dict[str, Tenant]:
    login("researcher")  # first sight: vision-lab and nlp-lab
    tenants = {t.name: t for t in Tenant.objects.filter(name__in=("vision-lab", "nlp-lab"))}
    for tenant in tenants.values():
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 8, "v100": 0, "t4": 0},
                             "max_workloads": 10})
    return tenants


def reserve(tenant: Tenant, gpu_types, count: int, start: dt.datetime, hours: float,
            note: str = "") -> Reservation:
    return Reservation.objects.create(tenant=tenant, gpu_type=gpu_types["a100"], count=count,
                                      start=start, end=start + dt.timedelta(hours=hours),
                                      note=note)


def announce(start: dt.datetime, hours: float, gpus: int = 8, reason: str = "driver update",
             **fields) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        start=start, end=start + dt.timedelta(hours=hours), reason=reason,
        gpu_type_id=None, affected={"gpu-a100-1": {"gpu_type": "a100", "gpus": gpus}}, **fields)


def test_a_member_sees_capacity_reservations_and_windows(lab, gpu_types, as_user):
    reserve(lab["vision-lab"], gpu_types, 4, soon(24), 8, note="NLP course lab")
    reserve(lab["nlp-lab"], gpu_types, 2, soon(48), 4, note="secret deadline")
    announce(soon(30), 4)
    response = as_user("researcher").get("/calendar/?gpu_type=a100")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<strong>16 a100 GPUs</strong> in service" in body
    assert "<td>vision-lab</td>" in body and "NLP course lab" in body
    assert "<td>reserved</td>" in body  # nlp-lab's, unnamed
    assert "nlp-lab</td>" not in body and "secret deadline" not in body
    assert "driver update" in body and "every a100 node" not in body  # named by its nodes
    assert "gpu-a100-1" not in body or "driver update" in body
    # the free-to-book table: 16 now, 12 while vision-lab's reservation runs, 8 in the window
    assert '<meter min="0" max="16" value="12"' in body
    assert '<meter min="0" max="16" value="4"' in body  # 4 reserved + 8 down
    # a member books nothing: no form, and the booking address refuses
    assert 'id="book-form"' not in body
    assert as_user("researcher").post("/calendar/book/", {}).status_code == 403
    # a day that does not exist shows today's two weeks, not an error page
    assert as_user("researcher").get("/calendar/?gpu_type=a100&from=2026-02-31").status_code \
        == 200


def test_an_admin_sees_every_projects_name_and_note(lab, gpu_types, login):
    reserve(lab["nlp-lab"], gpu_types, 2, soon(48), 4, note="secret deadline")
    body = login("admin").get("/calendar/?gpu_type=a100").content.decode()
    assert "<td>nlp-lab</td>" in body and "secret deadline" in body
    assert 'id="book-form"' in body and 'name="tenant"' in body


def book_form(start: dt.datetime, hours: float, count: int, **extra) -> dict:
    return {"gpu_type": "a100", "count": str(count), "start": local_input(start),
            "end": local_input(start + dt.timedelta(hours=hours)), "note": "demo day", **extra}


def test_a_manager_books_within_the_allowance(lab, gpu_types, as_user):
    lead = as_user("lead")
    body = lead.get("/calendar/").content.decode()
    assert "vision-lab has no reservation allowance" in body
    ReservationAllowance.objects.create(tenant=lab["vision-lab"], gpu_hours=40)
    body = lead.get("/calendar/").content.decode()
    assert 'id="book-form"' in body
    # what the end (or a cancellation) does, and that cancelling gives back only what is unused
    assert "A reservation cancelled while it runs keeps counting what it used until its " \
        "planned end" in body
    assert "the reservation is cancelled, the project&#x27;s quota goes back down at once" in body
    assert "10 minutes later those still beyond it are put back in line (batch jobs) or " \
        "stopped (services)." in body
    with TestCase.captureOnCommitCallbacks(execute=False):
        booked = lead.post("/calendar/book/", book_form(soon(24), 4, 4))
    assert booked.status_code == 302, booked.content.decode()[-3000:]
    reservation = Reservation.objects.get()
    assert (reservation.tenant, reservation.count, reservation.note) == (
        lab["vision-lab"], 4, "demo day")
    assert reservation.end - reservation.start == dt.timedelta(hours=4)
    assert AuditRecord.objects.filter(action="reservation.create").count() == 1
    # 16 more GPU-hours would pass the 40 allowed: refused with the reason, 403
    with TestCase.captureOnCommitCallbacks(execute=False):
        refused = lead.post("/calendar/book/", book_form(soon(48), 4, 8))
    assert refused.status_code == 403
    assert "may hold 40 GPU-hours of reservations to come" in refused.content.decode()
    assert Reservation.objects.count() == 1


def test_an_overbooking_is_refused_with_what_is_left(lab, gpu_types, login):
    start = soon(24)
    reserve(lab["nlp-lab"], gpu_types, 10, start, 4)
    announce(start, 4, gpus=4)
    admin = login("admin")
    with TestCase.captureOnCommitCallbacks(execute=False):
        refused = admin.post("/calendar/book/",
                             book_form(start, 2, 4, tenant=str(lab["vision-lab"].pk)))
    assert refused.status_code == 409
    body = refused.content.decode()
    assert 'id="book-refused"' in body
    assert "has 2 of its 16 a100 GPUs left to book (10 reserved, 4 in maintenance); " \
           "4 do not fit." in body
    assert Reservation.objects.count() == 1
    # within what is left, an admin books for another project
    with TestCase.captureOnCommitCallbacks(execute=False):
        booked = admin.post("/calendar/book/",
                            book_form(start, 2, 2, tenant=str(lab["vision-lab"].pk)))
    assert booked.status_code == 302
    assert Reservation.objects.filter(tenant=lab["vision-lab"], count=2).exists()


def test_invalid_bookings_show_the_fields_errors(lab, login):
    admin = login("admin")
    refused = admin.post("/calendar/book/", {**book_form(soon(24), 2, 1), "count": "0",
                                             "end": local_input(soon(20))})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "count: A whole number of GPUs from 1 to" in body
    assert "end: The end must come after the start." in body


def test_managers_cancel_their_projects_reservations_and_no_other(lab, gpu_types, as_user):
    ours = reserve(lab["vision-lab"], gpu_types, 2, soon(24), 4)
    theirs = reserve(lab["nlp-lab"], gpu_types, 2, soon(24), 4)
    lead = as_user("lead")
    body = lead.get("/calendar/").content.decode()
    assert f'action="/calendar/reservations/{ours.pk}/cancel/"' in body
    assert f'action="/calendar/reservations/{theirs.pk}/cancel/"' not in body
    assert as_user("researcher").post(f"/calendar/reservations/{ours.pk}/cancel/"
                                      ).status_code == 403  # a member
    assert lead.post(f"/calendar/reservations/{theirs.pk}/cancel/").status_code == 404
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert lead.post(f"/calendar/reservations/{ours.pk}/cancel/").status_code == 302
    ours.refresh_from_db()
    theirs.refresh_from_db()
    assert ours.cancelled_at is not None and theirs.cancelled_at is None
    assert AuditRecord.objects.filter(action="reservation.cancel").count() == 1


def test_the_admin_announces_and_cancels_a_window_and_sets_allowances(lab, gpu_types, login):
    admin = login("admin")
    page = admin.get("/admin/calendar/").content.decode()
    assert "No maintenance window is announced." in page
    assert "a100</a>:" in page and "a100 free now" in page
    form = {"covers": "gpu_type", "gpu_type": "a100", "start": local_input(soon(26)),
            "end": local_input(soon(30)), "reason": "driver update", "drain": "on"}
    with TestCase.captureOnCommitCallbacks(execute=False):
        done = admin.post("/admin/calendar/windows/", form)
    assert done.status_code == 302
    window = MaintenanceWindow.objects.get()
    assert (window.gpu_type.slug, window.reason, window.drain) == ("a100", "driver update", True)
    assert sorted(window.affected) == ["gpu-a100-1", "gpu-a100-2"]
    page = admin.get("/admin/calendar/").content.decode()
    assert "driver update" in page and "every a100 node" in page
    # what it covers is one thing; nodes by name
    refused = admin.post("/admin/calendar/windows/", {**form, "covers": "nodes", "nodes": ""})
    assert refused.status_code == 400 and "nodes: Name what it covers" in refused.content.decode()
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert admin.post("/admin/calendar/windows/", {
            **form, "covers": "nodes", "nodes": "gpu-a100-2"}).status_code == 302
    assert MaintenanceWindow.objects.latest("pk").nodes == ["gpu-a100-2"]
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert admin.post(f"/admin/calendar/windows/{window.pk}/cancel/").status_code == 302
    window.refresh_from_db()
    assert window.cancelled_at is not None
    assert AuditRecord.objects.filter(action="maintenance.cancel").count() == 1
    vision = lab["vision-lab"]
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert admin.post(f"/admin/calendar/allowances/{vision.pk}/",
                          {"gpu_hours": "100", "max_days_ahead": "30"}).status_code == 302
    allowance = ReservationAllowance.objects.get(tenant=vision)
    assert (allowance.gpu_hours, allowance.max_days_ahead) == (100, 30)
    with TestCase.captureOnCommitCallbacks(execute=False):
        admin.post(f"/admin/calendar/allowances/{vision.pk}/",
                   {"gpu_hours": "-1", "max_days_ahead": "30"})
        # digits that str.isdigit takes and int() does not: refused, not a server error
        assert admin.post(f"/admin/calendar/allowances/{vision.pk}/",
                          {"gpu_hours": "\u00b2", "max_days_ahead": "30"}).status_code == 302
    allowance.refresh_from_db()
    assert allowance.gpu_hours == 100


def test_the_banner_tells_those_who_could_be_affected(lab, gpu_types, as_user):
    announce(soon(26), 4, reason="driver update")
    announce(soon(24 * 9), 4, reason="too far ahead")
    MaintenanceWindow.objects.create(start=soon(26), end=soon(30), reason="v100 swap",
                                     affected={"gpu-v100-0": {"gpu_type": "v100", "gpus": 4}})
    researcher = as_user("researcher")
    for url in ("/workloads/new/", "/"):
        body = researcher.get(url).content.decode()
        assert 'id="maintenance-banner"' in body, url
        assert "a100 maintenance" in body and ": driver update" in body
        assert "too far ahead" not in body and "v100 swap" not in body
    # nlp-lab has no a100 quota now, but v100: its own window only
    quota_update(tenant=lab["nlp-lab"], acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 0, "v100": 8}})
    body = as_user("student", "nlp-lab").get("/workloads/new/").content.decode()
    assert "v100 maintenance" in body and "driver update" not in body
    quota_update(tenant=lab["nlp-lab"], acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"v100": 0, "t4": 8}})
    body = as_user("student", "nlp-lab").get("/workloads/new/").content.decode()
    assert 'id="maintenance-banner"' not in body


def test_the_launch_check_says_when_gpus_go(lab, gpu_types, as_user):
    cluster_cache_caught_up(("Node", "Pod"))  # an earlier test's pods gone from its copy too
    start = soon(3)
    announce(start, 4, gpus=8)
    reserve(lab["nlp-lab"], gpu_types, 8, start + dt.timedelta(hours=1), 2)
    reserve(lab["vision-lab"], gpu_types, 4, soon(2), 2)  # its own: gives, takes nothing
    body = as_user("researcher").get("/workloads/new/check/?gpu_type=a100&gpu_count=1").content.decode()
    # the times as the page writes them: a day's name before one on a later day than today
    # (a run in the evening crosses midnight)
    now = timezone.now()
    assert (f"16 a100 free now, 8 from {when_text(start, now)} (maintenance), "
            f"0 from {when_text(start + dt.timedelta(hours=1), now)} (reserved)") in body, body


def test_the_capacity_text_counts_what_is_down_now_once(lab, gpu_types):
    """A window already running is out of what is free now; its end gives the GPUs back."""
    now = timezone.now()
    announce(now - dt.timedelta(hours=1), 3, gpus=8)
    outlook = capacity_outlook(gpu_types["a100"], now=now, free_now=8)
    assert [(c["free"], c["why"]) for c in outlook["changes"]] == [(16, "maintenance ends")]
    assert outlook["text"].startswith("8 a100 free now, 16 from ")


def test_the_admin_announces_a_relayout_and_sees_how_each_gpu_node_is_carved(
        lab, gpu_types, login):
    cluster_cache_caught_up()
    admin = login("admin")
    page = admin.get("/admin/calendar/").content.decode()
    nodes = page[page.index('id="gpu-nodes"'):]
    row = nodes[nodes.index('data-node="gpu-a100-mig-1"'):]
    assert "2 × NVIDIA-A100-SXM4-80GB, MIG all-1g.10gb" in row[:400]
    assert "14 × 1g.10gb" in row[:400] and "success" in row[:400]
    t4 = nodes[nodes.index('data-node="gpu-t4-shared-1"'):]
    assert "time-slicing 4 ways" in t4[:400] and "16 × nvidia.com/gpu.shared" in t4[:400]
    form = {"covers": "nodes", "nodes": "gpu-a100-mig-1", "start": local_input(soon(26)),
            "end": local_input(soon(28)), "reason": "re-carve", "drain": "on",
            "relayout": "gpu-a100-mig-1=all-7g.80gb"}
    refused = admin.post("/admin/calendar/windows/", {**form, "relayout": "gpu-a100-mig-1=all-9g"})
    assert refused.status_code == 400
    assert "relayout: gpu-a100-mig-1: A A100/H100 80GB GPU has no MIG layout" in \
        refused.content.decode()
    assert "gpu-a100-mig-1=all-9g" in refused.content.decode()  # kept in the form
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert admin.post("/admin/calendar/windows/", form).status_code == 302
    window = MaintenanceWindow.objects.get()
    assert window.relayout == {"gpu-a100-mig-1": {"mig_config": "all-7g.80gb"}}
    page = admin.get("/admin/calendar/").content.decode()
    cell = page[page.index(f'id="relayout-{window.pk}"'):]
    assert "gpu-a100-mig-1: 14 × 1g.10gb → 2 × 7g.80gb (MIG all-7g.80gb)" in cell[:600]
