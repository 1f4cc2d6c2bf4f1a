"""`gpuctl quota`: the project's quota as set, and where something adjusts it (a running
reservation, maintenance, a budget's hold) what is in force now and why, in the portal's
words."""

from __future__ import annotations

import argparse
import io
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, print_record
from ..parser import Commands
from ..tenants import find_tenant


def register(commands: Commands) -> None:
    p = commands.command("quota", quota, "your project's quota (admins: --tenant)",
                         description="Your project's quota as set and, where something "
                                     "adjusts it, what is in force now and why.")
    p.add_argument("--tenant", help="tenant id, name or Keystone project id")


def quota(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.tenant)
    answer = api.get(f"tenants/{tenant['id']}/quota/")
    data = {"tenant": tenant["name"], "tenant_id": tenant["id"], **answer}

    def render(out: TextIO) -> None:
        out.write(f"tenant {tenant['name']} (id {tenant['id']}, namespace "
                  f"{tenant['namespace']})\n")
        by_type = answer.get("gpus_by_type") or {}
        by_class = {f"storage {name}": storage_limit_text(limit)
                    for name, limit in (answer.get("storage_by_class") or {}).items()}
        print_record({**answer, **{f"gpus {slug}": n for slug, n in by_type.items()},
                      **by_class},
                     ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory",
                      "max_workloads", "max_runtime_minutes", "storage_gib", "volumes",
                      *by_class, "idle_threshold_percent", "idle_minutes", "idle_action"], out)
        out.write(quota_in_force_text(answer))

    emit(args, data, render)
    return EXIT_OK


def storage_limit_text(limit: dict[str, Any]) -> str:
    """A storage class's quota: "200 GiB, 5 volumes" (a side the class does not bound left out)."""
    parts = [f"{limit['storage_gib']} GiB" if limit.get("storage_gib") is not None else "",
             f"{limit['volumes']} volumes" if limit.get("volumes") is not None else ""]
    return ", ".join(part for part in parts if part)


def quota_in_force_text(quota: dict[str, Any]) -> str:
    """What counts now where adjustments change the quota, as the portal words it (the API's
    `in_force.text` and each adjustment's `text`): "" when none do."""
    adjustments = quota.get("adjustments") or []
    if not adjustments:
        return ""
    in_force = quota.get("in_force") or {}
    by_type = in_force.get("gpus_by_type") or {}
    out = io.StringIO()
    out.write(f"\nin force now: {in_force.get('text')}\n")
    print_record({**in_force, **{f"gpus {slug}": n for slug, n in by_type.items()}},
                 ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory"], out)
    out.write("adjustments:\n")
    for item in adjustments:
        out.write(f"  {item.get('text')}\n")
    return out.getvalue()
