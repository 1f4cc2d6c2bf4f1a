"""`gpuctl record show|set`: a project's record (principal investigator, grants or cost
centres, field, the allocation's last day). Its people read it; admins and the admins of its
department set it (a department's admins name the project by its id)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, print_record
from ..parser import Commands, Parser
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl record
  gpuctl record set --project 12 --pi lead --grant ERC-101 --grant CC-4410 \\
      --field "computer vision" --ends 2027-06-30
  gpuctl record set --project vision-lab --no-end"""

FIELDS = ["tenant_name", "department", "principal_investigator_name", "grants", "field",
          "allocation_ends", "held"]


def register(commands: Commands) -> None:
    record = commands.noun("record", "a project's record and the end of its allocation",
                           default_verb="show", epilog=EXAMPLES)
    _project_option(record.verb("show", show, "the record"))
    p = record.verb("set", set_record, "change the record (admins, the department's admins)")
    _project_option(p)
    p.add_argument("--pi", help="the principal investigator: a user of the project (Keystone "
                                "user id, or a name only one of them has)")
    p.add_argument("--grant", action="append", metavar="GRANT",
                   help="a grant number or cost centre (repeatable; replaces the list)")
    p.add_argument("--field", help="the research field")
    ends = p.add_mutually_exclusive_group()
    ends.add_argument("--ends", metavar="YYYY-MM-DD", help="the allocation's last day")
    ends.add_argument("--no-end", action="store_true", help="the allocation has no end")


def _project_option(p: Parser) -> None:
    p.add_argument("--project", "--tenant", dest="project",
                   help="tenant id, name or Keystone project id (default: your token's)")


def _path(api: PortalClient, wanted: str | None) -> str:
    # an id is used as it is: a department's admin reaches its projects by id, not through
    # the list of their own token's tenants
    if wanted and wanted.isascii() and wanted.isdigit():
        return f"tenants/{wanted}/record/"
    return f"tenants/{find_tenant(api, wanted)['id']}/record/"


def _shown(args: argparse.Namespace, record: dict[str, Any]) -> int:
    def render(out: TextIO) -> None:
        print_record({**record, "grants": ", ".join(record["grants"]) or "-",
                      "allocation_ends": record["allocation_ends"] or "no end",
                      "held": "yes: new launches refused until renewed" if record["held"]
                      else "no"}, FIELDS, out)

    emit(args, record, render)
    return EXIT_OK


def show(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.get(_path(api, args.project)))


def set_record(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.pi is not None:
        body["principal_investigator"] = args.pi or None
    if args.grant is not None:
        body["grants"] = args.grant
    if args.field is not None:
        body["field"] = args.field
    if args.ends is not None or args.no_end:
        body["allocation_ends"] = None if args.no_end else args.ends
    return _shown(args, api.patch(_path(api, args.project), body))
