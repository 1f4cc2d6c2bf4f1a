"""SSH into a workload, the browser's part: a researcher launches Jupyter with the SSH
box ticked as it comes, watches it run, and copies the one command to paste from its page. The
live portal with the real Keystone, PostgreSQL, Redis, Celery workers and kubesim, in Chromium;
the page fails on any refusal by the Content-Security-Policy (conftest's page)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.waiting import eventually
from workloads.models import Workload

from .conftest import STATE_TIMEOUT_MS, switch_project

# serialized_rollback: the templates the migrations seed are there in every journey
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_researcher_launches_jupyter_with_ssh_and_copies_the_command(page, log_in, vision_lab,
                                                                     live_server):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"],
                                   origin=live_server.url)
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("Remote notebook")
    # DIGITS offers no SSH: no box; Jupyter's comes ticked (htmx swaps the template's fields)
    page.get_by_role("radio", name=re.compile("^NVIDIA DIGITS")).check()
    expect(page.get_by_label("SSH", exact=True)).to_have_count(0)
    page.get_by_role("radio", name=re.compile("^Jupyter")).check()
    ssh = page.get_by_label("SSH", exact=True)
    expect(ssh).to_be_checked()
    expect(ssh).to_have_accessible_description(re.compile(
        r"^Reach this workload with ssh, scp, VS Code Remote-SSH or JetBrains Gateway through "
        r"the portal's login \(gpuctl ssh ID\)\."))
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_role("button", name="Launch", exact=True).click()

    expect(page.get_by_role("status").filter(has_text="was submitted")).to_be_visible()
    workload = Workload.objects.get(tenant=vision_lab, name="Remote notebook")
    assert workload.ssh is True
    panel = page.locator("#workload-ssh")
    expect(page.locator("#workload-state .state")).to_have_text("running",
                                                                timeout=STATE_TIMEOUT_MS)
    # the panel follows the state on the live part of the page, without a reload
    command = panel.locator("#ssh-command")
    expect(command).to_have_text(f"gpuctl ssh {workload.pk}")
    expect(panel).to_contain_text(f"gpuctl ssh-config {workload.pk} --write ~/.ssh/config")
    expect(panel).to_contain_text(f"ssh gpu-portal-{workload.pk}")

    panel.get_by_role("button", name="Copy the SSH command").click()
    eventually(lambda: page.evaluate("navigator.clipboard.readText()")
               == f"gpuctl ssh {workload.pk}",
               timeout=10, message="the SSH command on the clipboard")
    panel.get_by_role("button", name="Copy the ssh-config command").click()
    eventually(lambda: page.evaluate("navigator.clipboard.readText()")
               == f"gpuctl ssh-config {workload.pk} --write ~/.ssh/config",
               timeout=10, message="the ssh-config command on the clipboard")
