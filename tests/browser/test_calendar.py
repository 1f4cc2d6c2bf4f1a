"""The cluster's calendar, the browser's part: an admin announces a maintenance window
and books GPUs for a project through the pages; a member of that project sees both on the
calendar and the window in the banner of the launch page. The live portal with the real
Keystone, PostgreSQL, Redis and kubesim, in Chromium; the page fails on any refusal by the
Content-Security-Policy (conftest's page)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from calendars.models import MaintenanceWindow, Reservation
from tests.support.database import demo_shared_gpu_types

from .conftest import switch_project

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def field_time(hours: float) -> str:
    """A datetime-local field's value, `hours` from now, in the portal's zone."""
    when = timezone.localtime() + dt.timedelta(hours=hours)
    return f"{when:%Y-%m-%dT%H:00}"


def test_an_admin_announces_and_books_and_a_member_sees_both(page, log_in, vision_lab):
    log_in(page, "admin")
    page.get_by_role("navigation", name="Administration").get_by_role(
        "link", name="Maintenance").click()
    expect(page.get_by_role("heading", name="Maintenance and reservations")).to_be_visible()
    form = page.locator("#announce-form")
    form.get_by_role("radio", name="every node of a GPU type").check()
    form.get_by_label("GPU type", exact=True).select_option("a100")
    form.locator("#w-start").fill(field_time(50))
    form.locator("#w-end").fill(field_time(54))
    form.get_by_label("Reason").fill("driver update")
    form.get_by_role("button", name="Announce").click()
    expect(page.get_by_role("status").filter(has_text="is announced")).to_be_visible()
    expect(page.locator("#admin-windows")).to_contain_text("driver update")
    expect(page.locator("#admin-windows")).to_contain_text("every a100 node")

    page.get_by_role("link", name="The calendar").click()
    booking = page.locator("#book-form")
    booking.get_by_label("Project").select_option(label="vision-lab")
    booking.locator("#book-type").select_option("a100")
    booking.get_by_label("GPUs").fill("4")
    booking.locator("#book-start").fill(field_time(26))
    booking.locator("#book-end").fill(field_time(30))
    booking.get_by_label("Note").fill("course lab")
    booking.get_by_role("button", name="Reserve").click()
    expect(page.get_by_role("status").filter(
        has_text="4 a100 GPUs are reserved for vision-lab")).to_be_visible()
    assert Reservation.objects.filter(tenant=vision_lab, count=4, note="course lab").exists()
    assert MaintenanceWindow.objects.filter(reason="driver update").exists()

    page.get_by_role("button", name="Log out").click()
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    # the dashboard's banner and the launch page's
    expect(page.locator("#maintenance-banner")).to_contain_text("a100 maintenance")
    page.get_by_role("link", name="Launch a workload").click()
    banner = page.locator("#maintenance-banner")
    expect(banner).to_contain_text("a100 maintenance")
    expect(banner).to_contain_text(": driver update")
    banner.get_by_role("link", name="The calendar").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Calendar of a100 GPUs")
    reservations = page.locator("#calendar-reservations")
    expect(reservations).to_contain_text("vision-lab")
    expect(reservations).to_contain_text("course lab")
    expect(page.locator("#calendar-windows")).to_contain_text("driver update")
    expect(page.locator("#calendar-capacity")).to_contain_text("16 a100 GPUs")
    # the free-to-book table: 12 of 16 while the reservation runs, none in the window
    free = page.locator("#calendar-free")
    expect(free).to_contain_text("12 of 16")
    expect(free).to_contain_text("0 of 16")
    # a member books nothing
    expect(page.locator("#book-form")).to_have_count(0)
    page.screenshot(path=".test-output/browser/calendar.png", full_page=True)


def test_an_admin_sees_how_the_gpu_nodes_are_carved_and_announces_a_relayout(
        page, log_in, vision_lab, gpu_types):
    demo_shared_gpu_types(gpu_types)
    log_in(page, "admin")
    page.get_by_role("navigation", name="Administration").get_by_role(
        "link", name="Maintenance").click()
    nodes = page.get_by_role("table", name="Each GPU node's layout and the units it advertises")
    expect(nodes.locator('tr[data-node="gpu-t4-shared-1"]')).to_contain_text(
        "time-slicing 4 ways")
    expect(nodes.locator('tr[data-node="gpu-t4-shared-1"]')).to_contain_text(
        "16 × nvidia.com/gpu.shared")
    expect(nodes.locator('tr[data-node="gpu-a100-mig-1"]')).to_contain_text("14 × 1g.10gb")
    form = page.locator("#announce-form")
    form.get_by_role("radio", name="these nodes").check()
    form.get_by_label("Node names").fill("gpu-t4-shared-1")
    form.locator("#w-start").fill(field_time(60))
    form.locator("#w-end").fill(field_time(62))
    form.get_by_label("Reason").fill("halve the sharing")
    form.get_by_label("Drain: stop the workloads still running at the start").check()
    relayout = form.get_by_label("Re-layout of named nodes (optional, needs drain)")
    expect(relayout).to_have_accessible_description(re.compile("One node a line"))
    relayout.fill("gpu-t4-shared-1=all-1g.10gb")
    form.get_by_role("button", name="Announce").click()
    expect(page.locator("#window-errors")).to_contain_text("cannot be partitioned with MIG")
    page.locator("#announce-form").get_by_label(
        "Re-layout of named nodes (optional, needs drain)").fill("gpu-t4-shared-1=replicas:2")
    page.locator("#announce-form").get_by_role("button", name="Announce").click()
    expect(page.get_by_role("status").filter(has_text="is announced")).to_be_visible()
    window = MaintenanceWindow.objects.get(reason="halve the sharing")
    expect(page.locator(f"#relayout-{window.pk}")).to_contain_text(
        "gpu-t4-shared-1: 16 × nvidia.com/gpu.shared → 8 × nvidia.com/gpu.shared "
        "(time-sliced 2 ways)")
    expect(page.locator(f"#relayout-{window.pk}")).to_contain_text("t4-shared: 16 → 8 units")
