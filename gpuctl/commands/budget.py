"""`gpuctl budget show|set|remove`: a project's GPU-hour budget (setting it is for admins)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, print_record, print_table
from ..parser import Commands, Parser, key_value
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl budget
  gpuctl budget set --project vision-lab --gpu-hours 2000 --weight a100=2 --weight t4=0.25 \\
      --hard --user-cap alice=400
  gpuctl budget remove --project vision-lab"""


def register(commands: Commands) -> None:
    budget = commands.noun("budget", "your project's GPU-hour budget (admins set it)",
                           default_verb="show", epilog=EXAMPLES)
    _project_option(budget.verb("show", show, "the budget: used, remaining, forecast, top "
                                              "users"))

    p = budget.verb("set", set_budget, "set a project's budget (admins)")
    _project_option(p)
    p.add_argument("--gpu-hours", type=float, metavar="N", required=True,
                   help="weighted GPU-hours per period")
    p.add_argument("--period", choices=["month", "quarter", "year"], default="month",
                   help="the period it resets after (default month)")
    p.add_argument("--weight", action="append", type=key_value(float, "GPU_TYPE=WEIGHT"),
                   metavar="GPU_TYPE=W",
                   help="what an hour of a GPU type counts (repeatable; unnamed: 1)")
    p.add_argument("--hard", action="store_true",
                   help="refuse launches when it is used up (default: warn only)")
    p.add_argument("--warn-at", type=percentages, metavar="P,P,…",
                   help="percentages to warn at (default 50,80,100)")
    p.add_argument("--stop-at-exhaustion", action="store_true",
                   help="stop running workloads when it is used up (after a grace)")
    p.add_argument("--user-cap", action="append", type=key_value(float, "USER=HOURS"),
                   metavar="USER=HOURS",
                   help="a user's own cap inside it, USER a user of the project by Keystone "
                        "user id or a name only one of them has (repeatable)")

    _project_option(budget.verb("remove", remove, "remove a project's budget (admins)"))


def _project_option(p: Parser) -> None:
    p.add_argument("--project", "--tenant", dest="project",
                   help="tenant id, name or Keystone project id (default: your token's)")


def percentages(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: percentages separated by commas, e.g. 50,80,100") from None


def show(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.project)
    return _shown(args, tenant, api.get(_path(tenant)))


def set_budget(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.project)
    body: dict[str, Any] = {"period": args.period, "gpu_hours": args.gpu_hours,
                            "weights": dict(args.weight or []), "hard": args.hard,
                            "stop_at_exhaustion": args.stop_at_exhaustion,
                            "user_caps": dict(args.user_cap or [])}
    if args.warn_at is not None:
        body["warn_at"] = args.warn_at
    return _shown(args, tenant, api.put(_path(tenant), body))


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = find_tenant(api, args.project)
    api.delete(_path(tenant))
    return _shown(args, tenant, api.get(_path(tenant)))


def _path(tenant: dict[str, Any]) -> str:
    return f"tenants/{tenant['id']}/budget/"


def _hours(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g}"


def _shown(args: argparse.Namespace, tenant: dict[str, Any], budget: dict[str, Any]) -> int:
    data = {**budget, "tenant": tenant["name"], "tenant_id": tenant["id"]}

    def render(out: TextIO) -> None:
        if budget["gpu_hours"] is None:
            out.write(f"tenant {tenant['name']}: no budget; {budget['used']:g} GPU-hours used "
                      f"since {budget['period_start'][:10]}\n")
            return
        kind = "hard" if budget["hard"] else "soft"
        out.write(f"tenant {tenant['name']}: {kind} budget of {_hours(budget['gpu_hours'])} "
                  f"weighted GPU-hours per {budget['period']}\n")
        weights = budget.get("weights") or {}
        print_record({**budget, "percent": f"{budget['percent']:g} %",
                      "used": f"{budget['used']:g}", "remaining": f"{budget['remaining']:g}",
                      "forecast": budget["forecast_exhausted_at"] or "not before the reset",
                      "weights": ", ".join(f"{k}={v:g}" for k, v in weights.items()) or "all 1",
                      "warn_at": ",".join(str(p) for p in budget["warn_at"])},
                     ["used", "remaining", "percent", "exhausted", "forecast", "resets_at",
                      "weights", "warn_at", "stop_at_exhaustion"], out)
        if budget.get("by_user"):
            out.write("top users:\n")
            print_table(budget["by_user"], [("USER", "user"), ("GPU-HOURS", "gpu_hours"),
                                            ("CAP", "cap")], out)

    emit(args, data, render)
    return EXIT_OK
