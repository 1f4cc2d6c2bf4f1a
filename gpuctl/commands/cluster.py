"""`gpuctl clusters list|show|add|set|remove`: the clusters behind the portal, their state and
GPU types; admins register a cluster (its credentials as a kubeconfig file of the portal's
processes or a Secret of the home cluster), change, disable or remove it."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, record, table
from ..parser import Commands

CLUSTER_COLUMNS: list[Column] = [
    ("name", "name"), ("state", "state"), ("gpu types", lambda r: gpu_types_text(r))]
# what an admin reads besides: where the credentials are, never what they hold
CLUSTER_FIELDS = ["name", "display_name", "state", "gpu_types", "home", "enabled", "api_server",
                  "credentials", "reason", "state_since", "last_seen"]


def register(commands: Commands) -> None:
    clusters = commands.noun("clusters", "the clusters behind the portal", default_verb="list",
                             epilog=EXAMPLES)
    clusters.verb("list", list_clusters, "every cluster with its state and GPU types")
    p = clusters.verb("show", show, "one cluster")
    p.add_argument("name", help="the cluster's name")
    p = clusters.verb("add", add, "register a cluster (admins): checked at once, its "
                                  "tenants' namespaces and queues made there")
    p.add_argument("name", help="lower-case letters, digits and '-'; it never changes")
    cluster_options(p)
    p = clusters.verb("set", change, "change a cluster (admins): credentials, GPU types, "
                                     "enabled")
    p.add_argument("name")
    cluster_options(p)
    p = clusters.verb("remove", remove, "remove a cluster from the portal (admins; its "
                                        "objects stay in it)")
    p.add_argument("name")


EXAMPLES = """\
examples:
  gpuctl clusters
  gpuctl clusters show east
  gpuctl clusters add east --kubeconfig-secret gpu-portal/east-kubeconfig --gpu-type h100
  gpuctl clusters set east --disable"""


def cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--display-name", metavar="TEXT")
    p.add_argument("--kubeconfig", dest="kubeconfig_path", metavar="PATH",
                   help="a kubeconfig file, as the portal's processes see it")
    p.add_argument("--kubeconfig-secret", metavar="NAMESPACE/NAME",
                   help="a Secret of the home cluster holding it under the key `kubeconfig`")
    p.add_argument("--gpu-type", dest="gpu_types", action="append", metavar="SLUG",
                   help="a GPU type it offers (repeatable; none: whatever its nodes carry)")
    enabled = p.add_mutually_exclusive_group()
    enabled.add_argument("--enable", dest="enabled", action="store_const", const=True,
                         help="take launches and dispatched work again")
    enabled.add_argument("--disable", dest="enabled", action="store_const", const=False,
                         help="take no new launches (what runs there stays)")


def cluster_body(args: argparse.Namespace) -> dict[str, Any]:
    """The options given, as the API names them: what is left out is left as it is."""
    fields = ("display_name", "kubeconfig_path", "kubeconfig_secret", "gpu_types", "enabled")
    return {field: getattr(args, field) for field in fields if getattr(args, field) is not None}


def gpu_types_text(row: dict[str, Any]) -> str:
    """"a100 16, t4 4": each GPU type it offers with its units."""
    return ", ".join(f"{slug} {units}" for slug, units in (row.get("gpu_types") or {}).items())


def list_clusters(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("clusters/")
    emit(args, rows, table(rows, CLUSTER_COLUMNS))
    return EXIT_OK


def show(api: PortalClient, args: argparse.Namespace) -> int:
    return _emit_cluster(args, api.get(f"clusters/{args.name}/"))


def _emit_cluster(args: argparse.Namespace, row: dict[str, Any]) -> int:
    """One cluster as a record: its fields the caller may read, its GPU types as text."""
    shown = {**row, "gpu_types": gpu_types_text(row)}
    emit(args, row, record(shown, [field for field in CLUSTER_FIELDS if field in row]))
    return EXIT_OK


def add(api: PortalClient, args: argparse.Namespace) -> int:
    row = api.post("clusters/", {"name": args.name, **cluster_body(args)})
    emit(args, row, line(f"cluster {row['name']} registered: {row['state']}"))
    return EXIT_OK


def change(api: PortalClient, args: argparse.Namespace) -> int:
    return _emit_cluster(args, api.patch(f"clusters/{args.name}/", cluster_body(args)))


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"clusters/{args.name}/")
    emit(args, {"name": args.name, "removed": True},
         line(f"cluster {args.name} removed from the portal"))
    return EXIT_OK
