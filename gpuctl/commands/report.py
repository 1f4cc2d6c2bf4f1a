"""`gpuctl report usage|close|reopen|months`: a month's GPU-hours, CPU-hours, storage and cost per
department, project, principal investigator or grant (managers their project's, department
admins their department's, admins every one), as a table, the portal's CSV or its JSON; an
admin closes a month (its statement frozen), opens a closed one again (its statement dropped,
with a reason) and lists the closed ones."""

from __future__ import annotations

import argparse
import io
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import cell, emit, emit_report, print_table
from ..parser import Commands

EXAMPLES = """\
examples:
  gpuctl report usage --period 2026-11 --by department
  gpuctl report usage --period 2026-11 --by grant --csv > november.csv
  gpuctl report close 2026-11
  gpuctl report reopen 2026-11 --reason "runs recorded late"
"""


def register(commands: Commands) -> None:
    report = commands.noun("report", "monthly usage and cost reports; closing a month",
                           default_verb="usage", epilog=EXAMPLES)
    p = report.verb("usage", usage, "a month's usage and cost, grouped")
    p.add_argument("--period", metavar="YYYY-MM", help="the month (default: this one)")
    p.add_argument("--by", dest="group_by", choices=["department", "tenant", "pi", "grant"],
                   help="group by (default department)")
    p.add_argument("--tenant", "--project", dest="tenant", metavar="ID",
                   help="one project's, by tenant id")
    p.add_argument("--csv", action="store_true", help="CSV, as the portal exports it")
    p = report.verb("close", close, "close a month that is over: its statement frozen "
                                    "(admins)")
    p.add_argument("period", metavar="YYYY-MM")
    p = report.verb("reopen", reopen, "open a closed month again: its statement dropped, "
                                      "worked out afresh until closed again (admins)")
    p.add_argument("period", metavar="YYYY-MM")
    p.add_argument("--reason", required=True, help="why (audited)")
    report.verb("months", months, "the closed months (admins)")


def usage(api: PortalClient, args: argparse.Namespace) -> int:
    emit_report(api, args, "reports/usage/", {
        "period": args.period, "group_by": args.group_by, "tenant": args.tenant}, report_text)
    return EXIT_OK


def report_text(report: dict[str, Any]) -> str:
    """The report's columns as a table (a GPU type's hours under gpu_hours_<slug>), then the
    totals; where the figures come from (the frozen statement, or worked out now)."""
    out = io.StringIO()
    state = "closed: its frozen statement" if report["closed"] else "open: worked out now"
    out.write(f"{report['period']} by {report['group_by']} ({state}), in "
              f"{report['currency']}\n")
    columns = [c for c in report["columns"] if c != "currency"]

    def value(column: str) -> Any:
        def read(row: dict[str, Any]) -> Any:
            if column.startswith("gpu_hours_") and column not in row:
                return row["gpu_hours_by_type"].get(column[len("gpu_hours_"):])
            return row.get(column)
        return read

    print_table(report["results"], [(c, value(c)) for c in columns], out)
    totals = report["totals"]
    out.write("total: " + ", ".join(f"{c} {cell(totals[c])}" for c in
                                    ("gpu_hours", "cpu_hours", "storage_gib_months", "cost"))
              + "\n")
    return out.getvalue()


def close(api: PortalClient, args: argparse.Namespace) -> int:
    closed = api.post("reports/months/", {"period": args.period})

    def render(out: TextIO) -> None:
        out.write(f"{closed['period']} closed: its statement is frozen\n")

    emit(args, closed, render)
    return EXIT_OK


def reopen(api: PortalClient, args: argparse.Namespace) -> int:
    reopened = api.post("reports/months/reopen/", {"period": args.period, "reason": args.reason})

    def render(out: TextIO) -> None:
        out.write(f"{reopened['period']} open again: its statement is dropped and its reports "
                  "are worked out afresh until it is closed again\n")

    emit(args, reopened, render)
    return EXIT_OK


def months(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("reports/months/")

    def render(out: TextIO) -> None:
        print_table(rows, [("MONTH", "period"), ("CLOSED", "closed_at"),
                           ("BY", lambda row: row["closed_by"] or "the beat"),
                           ("CURRENCY", "currency")], out)

    emit(args, rows, render)
    return EXIT_OK
