"""CSV for `?format=csv` (DRF picks the renderer by the `format` query parameter).

A spreadsheet opening the file reads a cell that starts with `=`, `+`, `-` or `@` (or a tab or
carriage return before one) as a formula: a workload named `=HYPERLINK("http://…")` would run
in the admin's spreadsheet. As OWASP advises, such a text cell is written with a single quote in
front (`'=HYPERLINK(…)`), which spreadsheets show as text; numbers are written as they are.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value as a CSV cell that no spreadsheet takes for a formula; None is empty."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class UsageCsvRenderer(BaseRenderer):
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
            for row in self.rows(data):
                writer.writerow([csv_cell(self.cell(row, c)) for c in columns])
        return out.getvalue().encode("utf-8")

    def rows(self, data: dict[str, Any]) -> list[Mapping[str, Any]]:
        """The rows below the header: the answer's results."""
        return list(data["results"])

    def cell(self, row: Mapping[str, Any], column: str) -> object:
        return row.get(column)
