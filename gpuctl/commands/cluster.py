"""`gpuctl clusters list|show`: the clusters behind the portal, their state and GPU types."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, record, table
from ..parser import Commands

CLUSTER_COLUMNS: list[Column] = [
    ("name", "name"), ("state", "state"), ("gpu types", lambda r: gpu_types_text(r))]
# what an admin reads besides: where the credentials are, never what they hold
CLUSTER_FIELDS = ["name", "display_name", "state", "gpu_types", "home", "enabled", "api_server",
                  "credentials", "reason", "state_since", "last_seen"]


def register(commands: Commands) -> None:
    clusters = commands.noun("clusters", "the clusters behind the portal", default_verb="list",
                             epilog="examples:\n  gpuctl clusters\n  gpuctl clusters show east")
    clusters.verb("list", list_clusters, "every cluster with its state and GPU types")
    p = clusters.verb("show", show, "one cluster")
    p.add_argument("name", help="the cluster's name")


def gpu_types_text(row: dict[str, Any]) -> str:
    """"a100 16, t4 4": each GPU type it offers with its units."""
    return ", ".join(f"{slug} {units}" for slug, units in (row.get("gpu_types") or {}).items())


def list_clusters(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("clusters/")
    emit(args, rows, table(rows, CLUSTER_COLUMNS))
    return EXIT_OK


def show(api: PortalClient, args: argparse.Namespace) -> int:
    row = api.get(f"clusters/{args.name}/")
    shown = {**row, "gpu_types": gpu_types_text(row)}
    emit(args, row, record(shown, [field for field in CLUSTER_FIELDS if field in row]))
    return EXIT_OK
