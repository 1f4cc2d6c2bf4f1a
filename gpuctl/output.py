"""The one way a command prints what it got: `emit(args, data, render)` writes `data` as JSON
(the API's own, for scripts) when the run asked for it (`--json` or `-o json`, options every
command has), else the text `render` writes: a table (`table`), a record (`record`), or the
portal's own sentences as they came."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from .client import PortalClient

Render = Callable[[TextIO], None]
# a column: (heading, the row's key or a function of the row)
Column = tuple[str, str | Callable[[dict[str, Any]], Any]]


def emit(args: argparse.Namespace, data: Any, render: Render) -> None:
    if args.output == "json":
        json.dump(data, args.out, indent=2, sort_keys=False, default=str)
        args.out.write("\n")
    else:
        render(args.out)


def emit_report(api: PortalClient, args: argparse.Namespace, path: str, params: dict[str, Any],
                text: Callable[[dict[str, Any]], str]) -> None:
    """A report the portal also serves as CSV: with `--csv` its CSV as it came, else its JSON
    or the text `text` makes of it."""
    if args.csv:
        response = api.request("GET", path, params={**params, "format": "csv"},
                               accept="text/csv")
        args.out.write(response.text)
        return
    report = api.get(path, **params)

    def render(out: TextIO) -> None:
        out.write(text(report))

    emit(args, report, render)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "-"
    return str(value)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], out: TextIO) -> None:
    cells = [[cell(key(row) if callable(key) else row.get(key)) for _, key in columns]
             for row in rows]
    headings = [heading for heading, _ in columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headings)]
    out.write("  ".join(h.upper().ljust(w) for h, w in zip(headings, widths, strict=True))
              .rstrip() + "\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def print_record(record: dict[str, Any], fields: Sequence[str], out: TextIO) -> None:
    width = max(len(f) for f in fields)
    for field in fields:
        out.write(f"{field.ljust(width)}  {cell(record.get(field))}\n")


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> Render:
    return lambda out: print_table(rows, columns, out)


def record(row: dict[str, Any], fields: Sequence[str]) -> Render:
    return lambda out: print_record(row, fields, out)


def line(text: str) -> Render:
    """One line of text (a sentence of the portal's, or what was done)."""
    def render(out: TextIO) -> None:
        out.write(text.rstrip("\n") + "\n")
    return render


def age(row: dict[str, Any]) -> str:
    """How long ago the row was created: "3d", "5h", "12m", "40s"."""
    created = row.get("created_at")
    if not created:
        return "-"
    try:
        then = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return str(created)
    seconds = int((dt.datetime.now(dt.UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
