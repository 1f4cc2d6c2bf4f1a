"""`gpuctl maintenance list|create|cancel`: maintenance windows on the calendar."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, record, table
from ..parser import Commands, when

EXAMPLES = """\
examples:
  gpuctl maintenance
  gpuctl maintenance create --gpu-type a100 --start 2026-12-01T14:00Z --end 2026-12-01T18:00Z \\
      --reason "driver update" --drain
  gpuctl maintenance cancel 3
times without a zone are this machine's local time"""

WINDOW_COLUMNS: list[Column] = [
    ("id", "id"), ("covers", "covers"), ("start", "start"), ("end", "end"), ("drain", "drain"),
    ("state", "state"), ("nodes", lambda w: len(w["affected"])), ("reason", "reason")]


def register(commands: Commands) -> None:
    maintenance = commands.noun("maintenance", "maintenance windows on the calendar",
                                default_verb="list", epilog=EXAMPLES)
    p = maintenance.verb("list", list_windows, "announced and running windows")
    p.add_argument("--gpu-type", help="only those covering nodes of this type")
    p.add_argument("--all", action="store_true", help="ended and cancelled ones too")

    p = maintenance.verb("create", create, "announce a window (admins)")
    covers = p.add_mutually_exclusive_group(required=True)
    covers.add_argument("--nodes", metavar="NAME,NAME", help="these nodes")
    covers.add_argument("--selector", metavar="KEY=VALUE,…", help="nodes with these labels")
    covers.add_argument("--gpu-type", help="every node of this type")
    p.add_argument("--start", type=when, required=True,
                   help="ISO date and time (no zone: local)")
    p.add_argument("--end", type=when, required=True, help="ISO date and time")
    p.add_argument("--reason", required=True, help="told to everyone affected")
    p.add_argument("--drain", action="store_true",
                   help="at the start, stop what still runs on the nodes")

    p = maintenance.verb("cancel", cancel, "cancel a window (admins; one in progress ends now)")
    p.add_argument("id", type=int, help="the window's id")


def list_windows(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("maintenance-windows/", include_past="1" if args.all else None)
    if args.gpu_type:
        rows = [w for w in rows if w.get("gpu_type") == args.gpu_type or any(
            (e or {}).get("gpu_type") == args.gpu_type for e in w["affected"].values())]
    emit(args, rows, table(rows, WINDOW_COLUMNS))
    return EXIT_OK


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"start": args.start, "end": args.end, "reason": args.reason,
                            "drain": args.drain}
    if args.nodes:
        body["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
    elif args.selector:
        body["node_selector"] = args.selector
    else:
        body["gpu_type"] = args.gpu_type
    made = api.post("maintenance-windows/", body)
    emit(args, made, record({**made, "affected": ",".join(sorted(made["affected"]))},
                            ["id", "covers", "start", "end", "reason", "drain", "state",
                             "affected"]))
    return EXIT_OK


def cancel(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"maintenance-windows/{args.id}/")
    emit(args, {"id": args.id, "cancelled": True},
         line(f"maintenance window {args.id} cancelled"))
    return EXIT_OK
