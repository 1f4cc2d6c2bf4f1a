"""`gpuctl request list|create|change|approve|deny`: ask for more (quota of a GPU type, a bigger
budget, a reservation beyond the allowance, a larger allowance, the allocation renewed), and,
for admins and a department's admins, decide."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, print_record, table
from ..parser import Commands, Parser, key_value

EXAMPLES = """\
examples:
  gpuctl request create quota --detail gpu_type=a100 --detail gpus=4 \\
      --until 2026-12-20T00:00:00Z --why "paper deadline"
  gpuctl request create renewal --detail allocation_ends=2027-06-30 --why "grant extended"
  gpuctl request change 12 --detail gpu_type=a100 --detail gpus=2 --why "a smaller run"
  gpuctl request list --state pending
  gpuctl request approve 12 --note "good luck"
  gpuctl request deny 13 --note "not this month\""""

COLUMNS: list[Column] = [("ID", "id"), ("PROJECT", "tenant_name"), ("KIND", "kind"),
                         ("DETAILS", lambda row: " ".join(f"{k}={v}" for k, v in
                                                          row["details"].items())),
                         ("UNTIL", "ends_at"), ("STATE", "state"), ("ASKER", "asker_name")]
FIELDS = ["id", "tenant_name", "kind", "details", "ends_at", "justification", "state",
          "asker_name", "decided_by", "note", "applied"]
NUMBERS = {"gpus", "gpu_hours", "count"}


def register(commands: Commands) -> None:
    request = commands.noun("request", "ask for more, or decide what was asked",
                            default_verb="list", epilog=EXAMPLES)
    p = request.verb("list", list_requests, "the requests you can see")
    p.add_argument("--state", choices=["pending", "approved", "denied", "ended"])
    p = request.verb("create", create, "ask (members and managers)")
    p.add_argument("kind", choices=["quota", "budget", "reservation", "allowance", "renewal"])
    p.add_argument("--detail", action="append", type=key_value(str, "NAME=VALUE"),
                   metavar="NAME=VALUE", required=True,
                   help="the kind's fields (repeatable): quota gpu_type, gpus; budget and "
                        "allowance gpu_hours; reservation gpu_type, count, start, end; "
                        "renewal allocation_ends")
    p.add_argument("--why", required=True, help="the justification")
    p.add_argument("--until", metavar="TIME", help="ISO 8601 time a quota, budget or allowance "
                                                   "grant ends by itself")
    p.add_argument("--project", type=int, metavar="TENANT_ID",
                   help="the tenant id (default: your token's project)")
    p = request.verb("change", change, "change your own pending request (its kind stays)")
    p.add_argument("id", type=int)
    p.add_argument("--detail", action="append", type=key_value(str, "NAME=VALUE"),
                   metavar="NAME=VALUE",
                   help="the kind's fields, all of them (repeatable); left out: as they were")
    p.add_argument("--why", help="the justification (left out: as it was)")
    until = p.add_mutually_exclusive_group()
    until.add_argument("--until", metavar="TIME", help="ISO 8601 time the grant ends by itself")
    until.add_argument("--for-good", action="store_true", help="no end: a lasting grant")
    for verb, run in (("approve", approve), ("deny", deny)):
        p = request.verb(verb, run, f"{verb} a request (admins, the department's admins)")
        _decision(p)


def _decision(p: Parser) -> None:
    p.add_argument("id", type=int)
    p.add_argument("--note", default="", help="what the asker is told")


def _number(name: str, value: str) -> Any:
    return int(value) if name in NUMBERS and value.isascii() and value.isdigit() else value


def _shown(args: argparse.Namespace, row: dict[str, Any]) -> int:
    def render(out: TextIO) -> None:
        print_record({**row, "details": " ".join(f"{k}={v}" for k, v in row["details"].items())},
                     FIELDS, out)

    emit(args, row, render)
    return EXIT_OK


def list_requests(api: PortalClient, args: argparse.Namespace) -> int:
    params = {"state": args.state} if args.state else {}
    rows = api.get_all("requests/", **params)
    emit(args, rows, table(rows, COLUMNS))
    return EXIT_OK


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"kind": args.kind, "justification": args.why,
                            "details": {name: _number(name, value)
                                        for name, value in args.detail}}
    if args.until:
        body["ends_at"] = args.until
    if args.project:
        body["tenant"] = args.project
    return _shown(args, api.post("requests/", body))


def change(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.detail:
        body["details"] = {name: _number(name, value) for name, value in args.detail}
    if args.why:
        body["justification"] = args.why
    if args.until:
        body["ends_at"] = args.until
    elif args.for_good:
        body["ends_at"] = None
    return _shown(args, api.patch(f"requests/{args.id}/", body))


def approve(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.post(f"requests/{args.id}/approve/", {"note": args.note}))


def deny(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.post(f"requests/{args.id}/deny/", {"note": args.note}))
