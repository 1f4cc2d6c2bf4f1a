"""The monthly report as CSV (`?format=csv`): its columns, a row per group, then the totals;
a GPU type's hours in a column of its own (gpu_hours_<slug>). Cells are written as the usage
report writes them (usage/api/renderers.py: no text a spreadsheet takes for a formula)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

from usage.api.renderers import csv_cell

from ..costing import report_cell


class ReportCsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out)
        if isinstance(data, dict) and "results" in data and "columns" in data:
            columns = data["columns"]
            writer.writerow([csv_cell(c) for c in columns])
            for row in data["results"]:
                writer.writerow([csv_cell(report_cell(row, c)) for c in columns])
            totals = {**data["totals"], columns[0]: "total"}
            writer.writerow([csv_cell(report_cell(totals, c)) for c in columns])
        return out.getvalue().encode("utf-8")
