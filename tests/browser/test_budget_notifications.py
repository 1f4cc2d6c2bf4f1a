"""Budgets and notifications, the browser's part: the launch page tells before submit
that a maximum runtime would cross the project's budget (also after the template's fields were
swapped in), and the bell on every page counts a researcher's unread notifications down to none.
The live portal with the real Keystone, PostgreSQL, Redis and kubesim, in Chromium; the page
fails on any refusal by the Content-Security-Policy (conftest's page)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from budgets.services import budget_set
from notifications.services import notify

from .conftest import STATE_TIMEOUT_MS, switch_project

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_the_launch_page_tells_a_runtime_that_would_cross_the_budget(page, log_in, vision_lab):
    budget_set(tenant=vision_lab, acting_user=None,
               fields={"period": "month", "gpu_hours": 10, "weights": {}, "hard": False,
                       "warn_at": [50, 80, 100], "stop_at_exhaustion": False, "user_caps": {}})
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    # another template, then Jupyter: htmx swaps the fields the runtime box is among
    page.get_by_role("radio", name=re.compile("^NVIDIA DIGITS")).check()
    page.get_by_role("radio", name=re.compile("^Jupyter")).check()
    expect(page.locator("#hint-memory")).to_contain_text("Jupyter")  # Jupyter's fields are in
    page.get_by_label("GPU type").select_option("a100")
    check = page.locator("#launch-check")
    # the GPU type's check has answered (no runtime yet: the budget may be overrun)
    expect(check).to_contain_text("No maximum runtime: running on, it may use more than the "
                                  "10.0 GPU-hours left of vision-lab's budget")
    # and no request of the check is still out (the GPU type's, under load)
    expect(check).not_to_have_class(re.compile(r"\bhtmx-request\b"), timeout=STATE_TIMEOUT_MS)
    runtime = page.get_by_label("Maximum runtime (minutes)")
    runtime.fill("900")  # 15 h × 1 a100 > 10 left
    runtime.press("Tab")  # typed, then left: the box's "change" asks again too
    expect(check).to_contain_text(re.compile(
        r"Its maximum runtime \(15 h × 1 a100 GPUs = 15\.0 GPU-hours\) would cross what is "
        r"left of vision-lab's budget: 10\.0 of 10 GPU-hours"), timeout=STATE_TIMEOUT_MS)
    page.get_by_label("Maximum runtime (minutes)").fill("300")  # 5 h: within it
    expect(check).not_to_contain_text("would cross")


def test_the_bell_counts_unread_notifications_down_to_none(page, log_in, vision_lab):
    researcher = get_user_model().objects.get(name="researcher")
    for i in (1, 2):
        notify(kind="finished", users=[researcher], tenant=vision_lab, title=f"job {i} finished",
               text=f"job {i} in vision-lab finished successfully.", key=f"browser:{i}")
    log_in(page, "researcher")
    bell = page.locator("#notifications-bell")
    expect(bell).to_have_accessible_name("Notifications: 2 unread")
    bell.click()
    expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
    expect(page.get_by_text("job 2 finished")).to_be_visible()
    page.get_by_role("button", name="Mark all read").click()
    expect(page.locator("#notifications-bell")).to_have_accessible_name(
        "Notifications: 0 unread")
