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
        print_record({**answer, **{f"gpus {slug}": n for slug, n in by_type.items()}},
                     ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory",
                      "max_workloads", "max_runtime_minutes", "idle_threshold_percent",
                      "idle_minutes", "idle_action"], out)
        out.write(quota_in_force_text(answer))

    emit(args, data, render)
    return EXIT_OK


def quota_in_force_text(quota: dict[str, Any]) -> str:
    """What counts now where adjustments change the quota (the API's `in_force` and
    `adjustments`, each with the portal's reason): "" when none do."""
    adjustments = quota.get("adjustments") or []
    if not adjustments:
        return ""
    in_force = quota.get("in_force") or {}
    by_type = in_force.get("gpus_by_type") or {}
    out = io.StringIO()
    out.write("\nin force now\n")
    print_record({**in_force, **{f"gpus {slug}": n for slug, n in by_type.items()}},
                 ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory"], out)
    if in_force.get("held"):
        out.write(f"queue held: {in_force.get('held_reason')}\n")
    for item in adjustments:
        what = ("queue held" if item.get("kind") == "hold" else
                f"{item.get('gpus', 0):+d} {item.get('gpu_type') or 'GPUs in all'}")
        until = f" until {item['ends_at']}" if item.get("ends_at") else ""
        out.write(f"  {item.get('source')}: {what}{until} ({item.get('reason')})\n")
    return out.getvalue()
