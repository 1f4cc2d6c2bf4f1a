"""CSV for `?format=csv` (DRF picks the renderer by the `format` query parameter)."""

from __future__ import annotations

import csv
import io

from rest_framework.renderers import BaseRenderer


class UsageCsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        out = io.StringIO()
        if isinstance(data, dict) and "results" in data and "columns" in data:
            writer = csv.writer(out)
            writer.writerow(data["columns"])
            for row in data["results"]:
                writer.writerow(["" if row.get(c) is None else row.get(c)
                                 for c in data["columns"]])
        else:  # an error body: {code, detail, fields}
            writer = csv.writer(out)
            writer.writerow(["code", "detail"])
            if isinstance(data, dict):
                writer.writerow([data.get("code", ""), data.get("detail", "")])
        return out.getvalue().encode("utf-8")
