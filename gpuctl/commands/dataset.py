"""`gpuctl datasets ls|show|create|rm`: the read-only datasets open to your project (a workload
mounts one with `gpuctl launch --dataset NAME[:/path]`); admins publish and withdraw them."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import ApiError, PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, record, table
from ..parser import Commands
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl datasets
  gpuctl datasets show imagenet
  gpuctl launch --template jupyter --gpu-type a100 --dataset imagenet
  gpuctl launch --template jupyter --gpu-type a100 --dataset imagenet:/data/imagenet
admins:
  gpuctl datasets create imagenet --size 150 --nfs nfs.example.org:/exports/imagenet \\
      --description "ILSVRC 2012" --project vision-lab
  gpuctl datasets create corpora --size 900 --s3 s3://corpora/text/ \\
      --endpoint https://s3.example.org --all-projects
  gpuctl datasets create scratch --size 2000 --pv lustre-scratch --all-projects
  gpuctl datasets rm imagenet"""

DATASET_COLUMNS: list[Column] = [
    ("id", "id"), ("name", "name"), ("kind", "kind"), ("size_gib", "size_gib"),
    ("path", "default_path"), ("description", "description")]
DATASET_FIELDS = ["id", "name", "description", "kind", "size_gib", "read_only", "default_path",
                  "source", "open_to_all", "projects"]


def register(commands: Commands) -> None:
    datasets = commands.noun("datasets", "read-only datasets open to your project",
                             default_verb="ls", description="Datasets: read-only data the "
                             "portal's admins publish, mounted into workloads.",
                             epilog=EXAMPLES)
    datasets.verb("ls", list_datasets, "the datasets open to your project (admins: every one)")
    p = datasets.verb("show", show, "one dataset")
    p.add_argument("dataset", metavar="DATASET", help="its id or name")

    p = datasets.verb("create", create, "publish a dataset (admins)")
    p.add_argument("name", help="its name: lower-case letters, digits and '-'")
    p.add_argument("--size", type=int, required=True, metavar="GIB", help="its size in GiB")
    p.add_argument("--description", default="", help="what it holds")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--nfs", metavar="SERVER:/PATH", help="an NFS export")
    source.add_argument("--pv", metavar="NAME", help="an existing PersistentVolume")
    source.add_argument("--csi", metavar="DRIVER:HANDLE", help="a CSI volume")
    source.add_argument("--s3", metavar="s3://BUCKET/PREFIX", help="an S3 bucket and prefix")
    p.add_argument("--attribute", action="append", metavar="NAME=VALUE",
                   help="--csi: a volume attribute (repeatable)")
    p.add_argument("--endpoint", metavar="URL", help="--s3: the S3 service's URL")
    p.add_argument("--region", help="--s3: the bucket's region")
    audience = p.add_mutually_exclusive_group(required=True)
    audience.add_argument("--all-projects", action="store_true", help="open to every project")
    audience.add_argument("--project", action="append", metavar="PROJECT",
                          help="open to this project: its tenant id or name (repeatable)")

    p = datasets.verb("rm", remove, "withdraw a dataset (admins; not while a workload mounts "
                                    "it)")
    p.add_argument("dataset", metavar="DATASET", help="its id or name")


def find_dataset(api: PortalClient, name: str) -> dict[str, Any]:
    """The dataset an argument means: its id or its name (names are unique)."""
    for row in api.get_all("datasets/"):
        if (name.isdigit() and row["id"] == int(name)) or row["name"] == name:
            return row
    raise ApiError(404, "not_found", f"No dataset {name!r} open to your project "
                                     "(gpuctl datasets ls lists them).")


def list_datasets(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("datasets/")
    emit(args, rows, table(rows, DATASET_COLUMNS))
    return EXIT_OK


def _shown(dataset: dict[str, Any]) -> dict[str, Any]:
    projects = dataset.get("projects")
    return {**dataset, "projects": ", ".join(p["name"] for p in projects)
            if projects is not None else None}


def show(api: PortalClient, args: argparse.Namespace) -> int:
    dataset = api.get(f"datasets/{find_dataset(api, args.dataset)['id']}/")
    emit(args, dataset, record(_shown(dataset), DATASET_FIELDS))
    return EXIT_OK


def source_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The kind and its fields from the source option given."""
    if args.nfs:
        server, sep, path = args.nfs.partition(":")
        if not sep:
            raise ApiError(400, "invalid", f"{args.nfs!r}: expected --nfs SERVER:/PATH.")
        return {"kind": "nfs", "server": server, "path": path}
    if args.pv:
        return {"kind": "pv", "persistent_volume": args.pv}
    if args.csi:
        driver, sep, handle = args.csi.partition(":")
        if not sep:
            raise ApiError(400, "invalid", f"{args.csi!r}: expected --csi DRIVER:HANDLE.")
        attributes = dict(item.partition("=")[::2] for item in args.attribute or [])
        return {"kind": "csi", "driver": driver, "volume_handle": handle,
                "volume_attributes": attributes}
    bucket, _, prefix = args.s3.removeprefix("s3://").partition("/")
    return {"kind": "s3", "bucket": bucket, "prefix": prefix, "endpoint": args.endpoint or "",
            "region": args.region or ""}


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "size_gib": args.size,
                            "description": args.description, **source_fields(args),
                            "open_to_all": bool(args.all_projects)}
    if args.project:
        body["projects"] = [find_tenant(api, project)["id"] for project in args.project]
    made = api.post("datasets/", body)
    emit(args, made, record(_shown(made), DATASET_FIELDS))
    return EXIT_OK


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    dataset = find_dataset(api, args.dataset)
    api.delete(f"datasets/{dataset['id']}/")
    emit(args, {"id": dataset["id"], "deleted": True},
         line(f"dataset {dataset['name']} ({dataset['id']}) withdrawn"))
    return EXIT_OK
