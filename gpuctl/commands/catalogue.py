"""`gpuctl gpu-types` and `gpuctl templates`: what there is to launch on and from."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, table
from ..parser import Commands


def register(commands: Commands) -> None:
    commands.command("gpu-types", gpu_types, "the GPU types with capacity and free GPUs",
                     description="The GPU types with their capacity, the GPUs free now and "
                                 "how the calendar changes that in the next 24 hours. A "
                                 "shared type (time-sliced or MIG) counts units, each the "
                                 "part of a GPU its sharing column says.")
    commands.command("templates", templates, "the templates to launch from",
                     description="The templates to launch from, with what `gpuctl launch "
                                 "--arg` may add to each (OPTIONS).")


def gpu_types(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("gpu-types/")
    # where the portal serves one cluster, the column would repeat CAPACITY and FREE
    several = len({name for row in rows for name in row.get("clusters") or {}}) > 1
    emit(args, rows, table(rows, [
        ("slug", "slug"), ("name", "name"), ("resource", gpu_type_resource),
        ("memory", lambda r: f"{r['memory_gb']} GB"), ("sharing", gpu_type_sharing),
        ("capacity", "capacity"), ("free", "free"), ("largest node", "largest_node"),
        *((("clusters", gpu_type_clusters),) if several else ()),
        ("next 24 h", gpu_type_ahead)]))
    return EXIT_OK


def gpu_type_resource(row: dict[str, Any]) -> str:
    """What a unit is asked as: the extended resource, or a DRA type's own device class."""
    return str(row.get("device_class") or row.get("resource_name") or "")


def gpu_type_sharing(row: dict[str, Any]) -> str:
    """"exclusive", "time-sliced 1/4 of t4", "dra" (a whole GPU claimed through DRA): how a unit
    shares its GPU (capacity and free count units)."""
    sharing = str(row.get("sharing") or "exclusive")
    if sharing == "exclusive" or (sharing == "dra" and row.get("gpu_fraction_text") == "1"):
        return sharing
    physical = row.get("physical")
    profile = f" {row['mig_profile']}," if row.get("mig_profile") else ""
    return f"{sharing}{profile} {row.get('gpu_fraction_text', '')}" + (
        f" of {physical}" if physical else "")


def gpu_type_clusters(row: dict[str, Any]) -> str:
    """Where the type is, with its free units there: "main 14/16, east 16/16"."""
    return ", ".join(f"{name} {figures['free']}/{figures['capacity']}"
                     for name, figures in (row.get("clusters") or {}).items())


def gpu_type_ahead(row: dict[str, Any]) -> str:
    """How the calendar changes the type's free GPUs in the next 24 hours ("" when it does not):
    the portal's own text, without the "free now" that the table has already: "8 from 14:00
    (maintenance), …"."""
    upcoming = row.get("upcoming") or {}
    if not upcoming.get("changes"):
        return ""
    return str(upcoming.get("text", "")).split(", ", 1)[-1]


def templates(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("templates/")
    emit(args, rows, table(rows, [
        ("slug", "slug"), ("name", "name"), ("kind", "kind"), ("image", "image"),
        ("port", "port"), ("cpu", "cpu"), ("memory", lambda r: f"{r['memory']} GiB"),
        ("options", template_options)]))
    return EXIT_OK


def template_options(row: dict[str, Any]) -> str:
    """What `--arg` may add to a launch of the template: any (custom), its options, or none."""
    if row.get("custom"):
        return "any"
    return " ".join(row.get("allowed_args") or []) or "-"
