"""`gpuctl reservations list|create|cancel`: GPUs booked on the calendar for a project."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, print_table, record
from ..parser import Commands, when
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl reservations
  gpuctl reservations create --gpu-type a100 --count 4 --start 2026-12-07T09:00 \\
      --end 2026-12-07T13:00 --weekly --until 2027-02-01 --note "course lab"
  gpuctl reservations cancel 12
times without a zone are this machine's local time"""

RESERVATION_COLUMNS: list[Column] = [
    ("id", "id"), ("project", "tenant_name"), ("gpu_type", "gpu_type"), ("gpus", "count"),
    ("start", "start"), ("end", "end"),
    ("repeats", lambda r: f"weekly until {r['until']}" if r.get("recurrence") else "once"),
    ("state", "state"), ("note", "note")]


def register(commands: Commands) -> None:
    reservations = commands.noun(
        "reservations", "GPU reservations on the calendar", default_verb="list",
        description="GPU reservations: GPUs of a type booked for a project for a while.",
        epilog=EXAMPLES)
    p = reservations.verb("list", list_reservations,
                          "your project's reservations (admins: every one)")
    p.add_argument("--gpu-type", help="only this type")
    p.add_argument("--tenant", "--project", dest="tenant",
                   help="only this project's (tenant id, name or Keystone project id)")
    p.add_argument("--all", action="store_true", help="past and cancelled ones too")

    p = reservations.verb("create", create,
                          "book GPUs (managers within the project's allowance; admins for "
                          "any project)", check=weekly_needs_until)
    p.add_argument("--gpu-type", required=True, help="the type to book")
    p.add_argument("--count", type=int, required=True, help="how many GPUs")
    p.add_argument("--start", type=when, required=True,
                   help="ISO date and time (no zone: local)")
    p.add_argument("--end", type=when, required=True, help="ISO date and time")
    p.add_argument("--weekly", action="store_true", help="every week, until --until")
    p.add_argument("--until", type=when, help="--weekly's last start is before this")
    p.add_argument("--note", help="what it is for (course, deadline, demo)")
    p.add_argument("--tenant", "--project", dest="tenant",
                   help="admins: the project booked for (tenant id, name or Keystone "
                        "project id)")

    p = reservations.verb("cancel", cancel, "cancel a reservation")
    p.add_argument("id", type=int, help="the reservation's id")


def list_reservations(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.tenant)["id"] if args.tenant else None
    rows = api.get_all("reservations/", gpu_type=args.gpu_type, tenant=tenant,
                       include_past="1" if args.all else None)

    def render(out: TextIO) -> None:
        print_table(rows, RESERVATION_COLUMNS, out)
        if rows and rows[0].get("at_end"):  # the same for every one: the portal's rule
            out.write(f"\n{rows[0]['at_end']}\n")

    emit(args, rows, render)
    return EXIT_OK


def weekly_needs_until(args: argparse.Namespace) -> str | None:
    return "--weekly needs --until" if args.weekly and args.until is None else None


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"gpu_type": args.gpu_type, "count": args.count,
                            "start": args.start, "end": args.end, "note": args.note or ""}
    if args.weekly:
        body.update(recurrence="weekly", until=args.until)
    if args.tenant:
        body["tenant"] = find_tenant(api, args.tenant)["id"]
    made = api.post("reservations/", body)
    emit(args, made, record(made, ["id", "tenant_name", "gpu_type", "count", "start", "end",
                                   "recurrence", "until", "note", "state", "at_end"]))
    return EXIT_OK


def cancel(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"reservations/{args.id}/")
    emit(args, {"id": args.id, "cancelled": True}, line(f"reservation {args.id} cancelled"))
    return EXIT_OK
