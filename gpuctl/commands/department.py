"""`gpuctl department list|show|create|update|delete|assign`: departments above projects (admins
write; a department's admins and a project's people see theirs)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, print_record, table
from ..parser import Commands, Parser
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl department list
  gpuctl department show 2
  gpuctl department create Physics --admins-project 3f1c… --gpu-cap 32
  gpuctl department update 2 --type-cap a100=16 --type-cap h100=8
  gpuctl department update 2 --no-gpu-cap --no-type-caps
  gpuctl department assign vision-lab --department 2
  gpuctl department assign vision-lab --none"""

def _type_caps(row: dict[str, Any]) -> str:
    return ", ".join(f"{slug}={gpus}" for slug, gpus in
                     sorted((row.get("gpu_caps_by_type") or {}).items())) or "-"


COLUMNS: list[Column] = [("ID", "id"), ("NAME", "name"), ("GPU CAP", "gpu_cap"),
                         ("TYPE CAPS", _type_caps),
                         ("PROJECTS", lambda row: ", ".join(row["tenants"]) or "-")]
FIELDS = ["id", "name", "description", "keystone_project_id", "gpu_cap", "gpu_caps_by_type",
          "tenants"]


def register(commands: Commands) -> None:
    department = commands.noun("department", "departments above projects (admins write)",
                               default_verb="list", epilog=EXAMPLES)
    department.verb("list", list_departments, "the departments you can see")
    p = department.verb("show", show, "one department, with what its projects use now "
                                      "against its caps")
    p.add_argument("id", help="the department's id")
    p = department.verb("create", create, "make a department (admins)")
    p.add_argument("name")
    _fields(p)
    p = department.verb("update", update, "change a department (admins)")
    p.add_argument("id", help="the department's id")
    p.add_argument("--name")
    _fields(p)
    p = department.verb("delete", delete, "remove a department; its projects stay, in none "
                                          "(admins)")
    p.add_argument("id", help="the department's id")
    p = department.verb("assign", assign, "put a project in a department, or in none (admins)")
    p.add_argument("project", help="tenant id, name or Keystone project id")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--department", metavar="ID", help="the department's id")
    which.add_argument("--none", action="store_true", help="take it out of its department")


def _fields(p: Parser) -> None:
    p.add_argument("--description")
    p.add_argument("--admins-project", dest="keystone_project_id", metavar="PROJECT_ID",
                   help="the Keystone project whose managers are its admins")
    cap = p.add_mutually_exclusive_group()
    cap.add_argument("--gpu-cap", type=int, metavar="N",
                     help="GPU-equivalents its projects hold together")
    cap.add_argument("--no-gpu-cap", action="store_true", help="no cap in all")
    caps = p.add_mutually_exclusive_group()
    caps.add_argument("--type-cap", action="append", type=_type_cap, metavar="TYPE=N",
                      help="GPUs of a type its projects hold together (repeat; the whole set: "
                           "a type left out has none)")
    caps.add_argument("--no-type-caps", action="store_true", help="no cap of any type")


def _type_cap(text: str) -> tuple[str, int]:
    slug, _, gpus = text.partition("=")
    if not slug or not gpus.isdigit():
        raise argparse.ArgumentTypeError(f"TYPE=N, e.g. a100=8 (not {text!r})")
    return slug, int(gpus)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body = {key: getattr(args, key) for key in ("name", "description", "keystone_project_id",
                                                "gpu_cap") if getattr(args, key, None) is not None}
    if args.no_gpu_cap:
        body["gpu_cap"] = None
    if args.type_cap or args.no_type_caps:
        body["gpu_caps_by_type"] = dict(args.type_cap or [])
    return body


def _shown(args: argparse.Namespace, department: dict[str, Any]) -> int:
    def render(out: TextIO) -> None:
        print_record({**department, "tenants": ", ".join(department["tenants"]) or "-",
                      "gpu_caps_by_type": _type_caps(department)}, FIELDS, out)

    emit(args, department, render)
    return EXIT_OK


def list_departments(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("departments/")
    emit(args, rows, table(rows, COLUMNS))
    return EXIT_OK


USE_COLUMNS: list[Column] = [
    ("GPU TYPE", "gpu_type"), ("IN USE", "used"), ("QUOTAS", "quotas"),
    ("CAP", lambda row: "-" if row["cap"] is None else row["cap"]),
    ("LEFT", lambda row: "-" if row["left"] is None else row["left"])]


def show(api: PortalClient, args: argparse.Namespace) -> int:
    """The department, then what its projects use now against its caps."""
    department = api.get(f"departments/{args.id}/")

    def render(out: TextIO) -> None:
        print_record({**department, "tenants": ", ".join(department["tenants"]) or "-",
                      "gpu_caps_by_type": _type_caps(department)}, FIELDS, out)
        use = department["use"]
        total = use["gpus_total"]
        out.write(f"\nin use now: {total['used_text']} GPU-equivalents"
                  + (f" of a cap of {total['cap']} ({total['left_text']} left)"
                     if total["cap"] is not None else " (no cap in all)")
                  + f"; its projects' quotas {total['quotas']} in all; "
                  f"{use['workloads']} active workloads\n")
        table(use["gpus_by_type"], USE_COLUMNS)(out)

    emit(args, department, render)
    return EXIT_OK


def create(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.post("departments/", _body(args)))


def update(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.patch(f"departments/{args.id}/", _body(args)))


def delete(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"departments/{args.id}/")
    emit(args, {"deleted": args.id}, line(f"department {args.id} removed"))
    return EXIT_OK


def assign(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.project)
    answer = api.patch(f"tenants/{tenant['id']}/",
                       {"department": None if args.none else args.department})

    def render(out: TextIO) -> None:
        out.write(f"{answer['name']}: department {answer['department_name'] or 'none'}\n")

    emit(args, answer, render)
    return EXIT_OK
