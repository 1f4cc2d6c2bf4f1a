"""`gpuctl calendar`: a GPU type's calendar as a text timeline (reserved, in maintenance,
free to book)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, print_table
from ..parser import Commands, when

BAR = 40  # the widest timeline bar, in characters


def register(commands: Commands) -> None:
    p = commands.command(
        "calendar", calendar, "a GPU type's calendar as a text timeline",
        description="A GPU type's calendar as a text timeline: what is reserved, in "
                    "maintenance and free to book; a bar of what is left (#), reserved (=) "
                    "and down for maintenance (x).",
        epilog="example:\n  gpuctl calendar --gpu-type a100 --since 2026-12-01 --until "
               "2026-12-15")
    p.add_argument("--gpu-type", required=True)
    p.add_argument("--since", type=when, help="default: now")
    p.add_argument("--until", type=when, help="default: two weeks after --since")


def calendar(api: PortalClient, args: argparse.Namespace) -> int:
    answer = api.get("calendar/", gpu_type=args.gpu_type, since=args.since, until=args.until)
    emit(args, answer, lambda out: timeline_text(answer, out))
    return EXIT_OK


def timeline_text(calendar: dict[str, Any], out: TextIO) -> None:
    """A type's calendar as text: each stretch with what is reserved, down and left to book,
    a bar of what is left (#) and taken (= reserved, x maintenance), then the bookings and
    the windows."""
    capacity: int = calendar["capacity"]
    out.write(f"{calendar['gpu_type']}: {capacity} GPUs in service, "
              f"{calendar['since']} .. {calendar['until']}\n")
    scale = BAR / capacity if capacity else 0

    def bar(row: dict[str, Any]) -> str:
        left: int = row["bookable"]
        reserved: int = row["reserved"]
        down = max(capacity - left - reserved, 0)
        return ("#" * round(left * scale) + "=" * round(reserved * scale)
                + "x" * round(down * scale))

    print_table(calendar["segments"], [("from", "start"), ("to", "end"),
                                       ("reserved", "reserved"), ("maintenance", "maintenance"),
                                       ("free to book", "bookable"), ("", bar)], out)
    if calendar["reservations"]:
        out.write("reservations:\n")
        print_table(calendar["reservations"], [
            ("id", "id"), ("project", lambda r: r["tenant"] or "(another project)"),
            ("gpus", "count"), ("start", "start"), ("end", "end"), ("note", "note")], out)
    if calendar["windows"]:
        out.write("maintenance:\n")
        print_table(calendar["windows"], [("id", "id"), ("gpus", "gpus"), ("start", "start"),
                                          ("end", "end"), ("covers", "covers"),
                                          ("reason", "reason")], out)
