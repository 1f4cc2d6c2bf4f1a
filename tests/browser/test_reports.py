"""The monthly report in the browser: a project's manager opens November's report, the chart
of each group's cost is drawn (uPlot, from the page's own JSON, under the
Content-Security-Policy: conftest's page fails on any refusal), the table holds the figures and
the CSV link downloads the same; an admin sets a price on the prices page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from billing.models import PriceSheet
from billing.services import prices_set
from billing.validation import prices_clean
from tenants.models import Tenant
from tests.fixtures.factories import make_workload
from tests.support.billing import PRICES, at

from .conftest import switch_project

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_a_manager_sees_the_chart_and_downloads_the_csv(page, log_in, login, gpu_types,
                                                        live_server, settings):
    settings.TIME_ZONE = "UTC"
    login("lead")
    make_workload(Tenant.objects.get(name="vision-lab"), "lead", gpu_type="a100", gpu_count=2,
                  state="succeeded", started_at=at(3, 10), finished_at=at(3, 16, 30))
    prices_set(acting_user=None, **prices_clean({**PRICES, "gpu": {"a100": "2.3456"}}))
    log_in(page, "lead")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Reports").click()
    page.get_by_label("Month").fill("2025-11")
    page.get_by_label("Group by").select_option("tenant")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage and cost, 2025-11")
    expect(page.locator("#report-chart canvas")).to_have_count(1)  # uPlot drew it
    expect(page.locator("#report-table tbody tr")).to_have_count(1)
    # 13 GPU-hours × 2.3456 = 30.49; 26 CPU-hours × 0.0125 = 0.325 → 0.33 (half up)
    expect(page.locator("#report-table tbody")).to_contain_text("30.82")
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    text = open(download.value.path(), encoding="utf-8").read()
    assert text.splitlines()[0].startswith("tenant_id,tenant,projects,gpu_hours,gpu_hours_a100")
    assert "vision-lab" in text and "30.82" in text


def test_an_admin_sets_a_price_on_the_prices_page(page, log_in, login, gpu_types, live_server):
    login("admin")
    log_in(page, "admin")
    page.goto(f"{live_server.url}/admin/prices/")
    page.get_by_label("From").fill("2025-01-01")
    page.get_by_label("NVIDIA A100 80GB a100").fill("2.50")
    page.get_by_role("button", name="Save prices").click()
    expect(page.locator("#price-history")).to_contain_text("2.5000")
    assert str(PriceSheet.objects.get().gpu_prices.get().per_hour) == "2.5000"
