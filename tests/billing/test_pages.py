"""The monthly report page (/reports/: its table, chart data and the CSV and JSON addresses,
for managers; members 403) and the admin's prices page (/admin/prices/: set prices through the
API's validation, audited; close a month)."""

from __future__ import annotations

import pytest
from django.test import TestCase

from audit.models import AuditRecord
from billing.models import MonthClose, MonthReopen, PriceSheet
from billing.services import prices_set
from billing.validation import prices_clean
from tests.support.billing import PRICES

pytestmark = pytest.mark.django_db


def test_a_manager_reads_the_report_page_with_its_chart_and_downloads(november, login):
    prices_set(acting_user=None, **prices_clean(PRICES))
    client = login("lead")  # vision-lab's manager
    response = client.get("/reports/", {"period": "2025-11", "group_by": "tenant"})
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="report-table"' in body and "vision-lab" in body and "nlp-lab" not in body
    assert "72.92" in body
    chart = response.context["chart"]
    assert chart["labels"] == ["vision-lab"] and chart["currency"] == "EUR"
    assert 'id="report-chart-data"' in body  # the chart's figures, in the page
    csv_answer = client.get(response.context["csv_url"])  # the API, with the session
    assert csv_answer.status_code == 200 and "72.92" in csv_answer.content.decode()
    assert client.get(response.context["json_url"]).json()["results"][0]["cost"] == "72.92"


def test_members_get_no_report_page_and_a_bad_month_is_400(november, login):
    assert login("researcher").get("/reports/", {"period": "2025-11"}).status_code == 403
    assert login("lead").get("/reports/", {"period": "2025-13"}).status_code == 400


def test_an_admin_sets_prices_and_closes_a_month_on_the_page(november, login):
    client = login("admin")
    with TestCase.captureOnCommitCallbacks(execute=True):
        refused = client.post("/admin/prices/save/", {"effective_from": "2025-01-01",
                                                      "gpu-a100": "-2"})
    assert refused.status_code == 400 and not PriceSheet.objects.exists()
    saved = client.post("/admin/prices/save/", {"effective_from": "2025-01-01",
                                                "gpu-a100": "2.3456", "cpu_hour": "0.0125"})
    assert saved.status_code == 302
    sheet = PriceSheet.objects.get()
    assert [(p.gpu_type.slug, str(p.per_hour)) for p in sheet.gpu_prices.all()] == [
        ("a100", "2.3456")]
    assert AuditRecord.objects.get(action="prices.set").before is None
    page = client.get("/admin/prices/").content.decode()
    assert "2.3456" in page and "(in force)" in page
    closed = client.post("/admin/prices/close-month/", {"period": "2025-11"})
    assert closed.status_code == 302
    assert MonthClose.objects.get().closed_by is not None
    again = client.post("/admin/prices/close-month/", {"period": "2025-11"})
    assert again.status_code == 400 and "closed already" in again.content.decode()


def test_an_admin_reopens_a_closed_month_on_the_page(november, login):
    client = login("admin")
    assert client.post("/admin/prices/close-month/", {"period": "2025-11"}).status_code == 302
    page = client.get("/admin/prices/").content.decode()
    assert 'id="reopen-month-form"' in page and '<option value="2025-11">' in page
    refused = client.post("/admin/prices/reopen-month/", {"period": "2025-11", "reason": ""})
    assert refused.status_code == 400 and "a reason is required" in refused.content.decode()
    never = client.post("/admin/prices/reopen-month/", {"period": "2025-10", "reason": "x"})
    assert never.status_code == 400 and "2025-10 is not closed" in never.content.decode()
    reopened = client.post("/admin/prices/reopen-month/",
                           {"period": "2025-11", "reason": "a late run"})
    assert reopened.status_code == 302
    assert not MonthClose.objects.exists()
    row = MonthReopen.objects.get()
    assert (row.reason, row.reopened_by.name) == ("a late run", "admin")
    page = client.get("/admin/prices/").content.decode()
    assert 'id="reopened-months"' in page and "a late run" in page
    assert login("lead").post("/admin/prices/reopen-month/",
                              {"period": "2025-11", "reason": "x"}).status_code == 403
