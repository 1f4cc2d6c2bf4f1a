"""`gpuctl volumes ls|create|grow|rm`: your volumes and your project's (a workload mounts them
with `gpuctl launch --mount VOLUME:/path[:ro]`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import ApiError, PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, record, table
from ..parser import Commands

EXAMPLES = """\
examples:
  gpuctl volumes
  gpuctl volumes create datasets --size 200 --class fast-ssd
  gpuctl volumes create shared --size 500 --project      # managers: the project's
  gpuctl volumes grow datasets --size 300
  gpuctl volumes rm datasets
  gpuctl launch --template jupyter --gpu-type a100 --mount datasets:/data:ro"""

VOLUME_COLUMNS: list[Column] = [
    ("id", "id"), ("name", "name"), ("scope", "scope"), ("owner", "owner"),
    ("size_gib", "size_gib"), ("class", lambda row: row.get("storage_class") or "(default)"),
    ("state", "state"), ("reason", "reason")]
VOLUME_FIELDS = ["id", "name", "scope", "owner", "size_gib", "storage_class", "claim_name",
                 "state", "reason"]


def register(commands: Commands) -> None:
    volumes = commands.noun("volumes", "your volumes and your project's", default_verb="ls",
                            description="Volumes: storage of yours or of the project, mounted "
                                        "into workloads.", epilog=EXAMPLES)
    p = volumes.verb("ls", list_volumes, "the volumes you may see, with their state")
    p.add_argument("--scope", choices=["user", "project"], help="only these")

    p = volumes.verb("create", create, "make a volume (a member their own, a manager the "
                                       "project's)")
    p.add_argument("name", help="its name (1 to 63 characters)")
    p.add_argument("--size", type=int, required=True, metavar="GIB", help="its size in GiB")
    p.add_argument("--class", dest="storage_class", metavar="CLASS",
                   help="a storage class offered (default: the site's default)")
    p.add_argument("--project", action="store_true",
                   help="the project's volume, every member's to mount (managers)")

    p = volumes.verb("grow", grow, "grow a volume in place (where its class can)")
    p.add_argument("volume", metavar="VOLUME", help="its id or name")
    p.add_argument("--size", type=int, required=True, metavar="GIB", help="its new size in GiB")

    p = volumes.verb("rm", remove, "delete a volume and its data (not while a workload mounts "
                                   "it)")
    p.add_argument("volume", metavar="VOLUME", help="its id or name")


def find_volume(api: PortalClient, name: str) -> dict[str, Any]:
    """The volume an argument means: its id, or a name only one of the caller's volumes has."""
    rows = api.get_all("volumes/")
    if name.isdigit():
        found = [row for row in rows if row["id"] == int(name)]
        if found:
            return found[0]
    found = [row for row in rows if row["name"] == name]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ApiError(404, "not_found", f"No volume {name!r} that you can see "
                                         "(gpuctl volumes ls lists them).")
    raise ApiError(400, "invalid", f"{len(found)} volumes are named {name!r}: name one by its "
                                   f"id ({', '.join(str(row['id']) for row in found)}).")


def list_volumes(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("volumes/", scope=args.scope)
    emit(args, rows, table(rows, VOLUME_COLUMNS))
    return EXIT_OK


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "size_gib": args.size,
                            "scope": "project" if args.project else "user"}
    if args.storage_class:
        body["storage_class"] = args.storage_class
    made = api.post("volumes/", body)
    emit(args, made, record(made, VOLUME_FIELDS))
    return EXIT_OK


def grow(api: PortalClient, args: argparse.Namespace) -> int:
    volume = find_volume(api, args.volume)
    grown = api.patch(f"volumes/{volume['id']}/", {"size_gib": args.size})
    emit(args, grown, record(grown, VOLUME_FIELDS))
    return EXIT_OK


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    volume = find_volume(api, args.volume)
    api.delete(f"volumes/{volume['id']}/")
    emit(args, {"id": volume["id"], "deleted": True},
         line(f"volume {volume['name']} ({volume['id']}) deleted"))
    return EXIT_OK
