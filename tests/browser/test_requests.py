"""A request's journey in a real browser (Chromium), against the live portal with the real
Keystone, PostgreSQL, Redis, Celery workers and kubesim: the researcher's launch is refused by
the quota, they ask for more on the requests page, an admin approves it in another browser,
and the launch that was refused now runs."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from allocations.models import ResourceRequest
from audit.models import AuditRecord
from tenants.models import Tenant
from tests.support.waiting import eventually
from workloads.models import Workload

from .conftest import STATE_TIMEOUT_MS, switch_project

# serialized_rollback: the templates the migrations seed are there in every journey
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def launch_five_a100(page) -> None:
    page.get_by_role("navigation", name="Project pages").get_by_role("link", name="Launch").click()
    page.get_by_label("Name").fill("Big run")
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_label("GPUs", exact=True).fill("5")
    page.get_by_role("button", name="Launch", exact=True).click()


def test_a_member_asks_an_admin_approves_and_the_refused_launch_runs(
        browser, browser_context_args, page, log_in, vision_lab):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    launch_five_a100(page)  # the quota holds 4 a100
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("Not launched:")
    expect(refusal).to_contain_text("4 a100 GPUs")
    assert not Workload.objects.filter(name="Big run").exists()

    refusal.get_by_role("link", name="ask for more quota").click()
    page.get_by_label("What", exact=True).select_option("quota")
    page.locator("#id_quota-gpu_type").select_option("a100")
    page.get_by_label("GPUs more").fill("1")
    page.get_by_label("Why", exact=True).fill("The final experiment of a thesis needs 5 GPUs at once.")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="asked")).to_be_visible()
    asked = ResourceRequest.objects.get(tenant=vision_lab)
    expect(page.locator("#requests-table")).to_contain_text("pending")

    admin = browser.new_context(**browser_context_args).new_page()
    log_in(admin, "admin")
    admin.get_by_role("navigation", name="Project pages").get_by_role(
        "link", name="Project", exact=True).click()
    admin.get_by_role("link", name="Requests", exact=True).click()
    queue = admin.locator("#request-queue")
    expect(queue).to_contain_text("vision-lab")
    expect(queue).to_contain_text("The final experiment of a thesis")
    approved_at = timezone.now()
    admin.get_by_label(f"Note on request {asked.pk}").fill("Good luck with the thesis")
    queue.get_by_role("button", name="Approve").click()
    expect(admin.get_by_role("status").filter(has_text="approved")).to_be_visible()
    admin.context.close()
    # the quota's change reconciles the namespace (the worker's task, enqueued on commit)
    eventually(lambda: Tenant.objects.filter(pk=vision_lab.pk,
                                             last_reconciled_at__gt=approved_at).exists(),
               timeout=60, message="the worker reconciles vision-lab's namespace")

    page.reload()
    expect(page.locator("#requests-table")).to_contain_text("approved")
    expect(page.locator("#requests-table")).to_contain_text("Good luck with the thesis")
    launch_five_a100(page)
    expect(page.get_by_role("status").filter(has_text="was submitted")).to_contain_text(
        "Big run was submitted: 5× a100")
    expect(page.locator("#workload-state .state")).to_have_text("running",
                                                                timeout=STATE_TIMEOUT_MS)
    assert {"request.create", "request.approve", "quota.update"} <= set(
        AuditRecord.objects.filter(tenant=vision_lab).values_list("action", flat=True))
