"""`gpuctl usage`: GPU-hours allocated and used, and by tenant or user the storage held in
GiB-days, as the portal reports them (or its CSV)."""

from __future__ import annotations

import argparse
import io
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import cell, emit_report, print_table
from ..parser import Commands


def register(commands: Commands) -> None:
    p = commands.command("usage", usage, "GPU-hours allocated and used, storage in GiB-days",
                         epilog="examples:\n  gpuctl usage --group-by user --since 2026-11-01\n"
                                "  gpuctl usage --csv > usage.csv")
    p.add_argument("--since", help="ISO date or date-time (default: 30 days ago)")
    p.add_argument("--until", help="ISO date or date-time (default: now)")
    p.add_argument("--group-by", choices=["tenant", "user", "gpu_type", "workload", "day",
                                          "cluster"])
    p.add_argument("--tenant", help="tenant id or name (admins)")
    p.add_argument("--workload", type=int)
    p.add_argument("--csv", action="store_true", help="CSV, as the portal exports it")


def usage(api: PortalClient, args: argparse.Namespace) -> int:
    emit_report(api, args, "usage/", {
        "since": args.since, "until": args.until, "group_by": args.group_by,
        "tenant": args.tenant, "workload": args.workload}, usage_text)
    return EXIT_OK


def usage_text(report: dict[str, Any]) -> str:
    """The report as a table of its columns (the portal's: GPU-hours, and storage_gib_days by
    tenant or user), then its totals."""
    out = io.StringIO()
    columns = report.get("columns") or []
    rows = report.get("results") or []
    out.write(f"usage {report['since']} .. {report['until']} by {report['group_by']}\n")
    print_table(rows, [(c, c) for c in columns], out)
    totals = report.get("totals") or {}
    if totals:
        out.write("total: " + ", ".join(f"{k} {cell(v)}" for k, v in totals.items()
                                        if v is not None or k != "storage_gib_days") + "\n")
    return out.getvalue()
