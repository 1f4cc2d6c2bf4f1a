"""The monthly report as CSV (`?format=csv`): its columns, a row per group, then the totals;
a GPU type's hours in a column of its own (gpu_hours_<slug>). Cells are written as the usage
report writes them (usage/api/renderers.py: no text a spreadsheet takes for a formula)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from usage.api.renderers import UsageCsvRenderer

from ..costing import report_cell


class ReportCsvRenderer(UsageCsvRenderer):
    """The usage report's CSV, each cell as the report writes it, and a last row of totals."""

    def rows(self, data: dict[str, Any]) -> list[Mapping[str, Any]]:
        return [*data["results"], {**data["totals"], data["columns"][0]: "total"}]

    def cell(self, row: Mapping[str, Any], column: str) -> object:
        return report_cell(row, column)
