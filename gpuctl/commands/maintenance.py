"""`gpuctl maintenance list|create|show|cancel`: maintenance windows on the calendar."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, emit, line, record, table
from ..parser import Commands, when

EXAMPLES = """\
examples:
  gpuctl maintenance
  gpuctl maintenance create --gpu-type a100 --start 2026-12-01T14:00Z --end 2026-12-01T18:00Z \\
      --reason "driver update" --drain
  gpuctl maintenance create --nodes gpu-a100-mig-1 --relayout gpu-a100-mig-1=all-3g.40gb \\
      --start 2026-12-01T14:00Z --end 2026-12-01T16:00Z --reason "re-carve the A100s" --drain
  gpuctl maintenance create --nodes gpu-t4-shared-1 --relayout gpu-t4-shared-1=replicas:2 …
  gpuctl maintenance show 4
  gpuctl maintenance cancel 3
times without a zone are this machine's local time"""

WINDOW_COLUMNS: list[Column] = [
    ("id", "id"), ("covers", "covers"), ("start", "start"), ("end", "end"), ("drain", "drain"),
    ("state", "state"), ("nodes", lambda w: len(w["affected"])), ("reason", "reason")]


def register(commands: Commands) -> None:
    maintenance = commands.noun("maintenance", "maintenance windows on the calendar",
                                default_verb="list", epilog=EXAMPLES)
    p = maintenance.verb("list", list_windows, "announced and running windows")
    p.add_argument("--gpu-type", help="only those covering nodes of this type")
    p.add_argument("--all", action="store_true", help="ended and cancelled ones too")

    p = maintenance.verb("create", create, "announce a window (admins)")
    covers = p.add_mutually_exclusive_group(required=True)
    covers.add_argument("--nodes", metavar="NAME,NAME", help="these nodes")
    covers.add_argument("--selector", metavar="KEY=VALUE,…", help="nodes with these labels")
    covers.add_argument("--gpu-type", help="every node of this type")
    p.add_argument("--start", type=when, required=True,
                   help="ISO date and time (no zone: local)")
    p.add_argument("--end", type=when, required=True, help="ISO date and time")
    p.add_argument("--reason", required=True, help="told to everyone affected")
    p.add_argument("--drain", action="store_true",
                   help="at the start, stop what still runs on the nodes")
    p.add_argument("--relayout", action="append", default=[], metavar="NODE=LAYOUT",
                   help="after the drain, lay a named node out anew: NODE=all-3g.40gb (a MIG "
                        "config) or NODE=replicas:N (time-slicing N ways); repeatable")

    p = maintenance.verb("show", show, "one window, with its re-layout's plan and progress")
    p.add_argument("id", type=int, help="the window's id")

    p = maintenance.verb("cancel", cancel, "cancel a window (admins; one in progress ends now)")
    p.add_argument("id", type=int, help="the window's id")


def list_windows(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("maintenance-windows/", include_past="1" if args.all else None)
    if args.gpu_type:
        rows = [w for w in rows if w.get("gpu_type") == args.gpu_type or any(
            (e or {}).get("gpu_type") == args.gpu_type for e in w["affected"].values())]
    emit(args, rows, table(rows, WINDOW_COLUMNS))
    return EXIT_OK


def create(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"start": args.start, "end": args.end, "reason": args.reason,
                            "drain": args.drain}
    if args.nodes:
        body["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
    elif args.selector:
        body["node_selector"] = args.selector
    else:
        body["gpu_type"] = args.gpu_type
    if args.relayout:
        body["relayout"] = relayout_of(args.relayout)
    made = api.post("maintenance-windows/", body)
    _emit_window(args, made)
    return EXIT_OK


def relayout_of(terms: list[str]) -> dict[str, dict[str, Any]]:
    """["gpu-a100-mig-1=all-3g.40gb", "gpu-t4-shared-1=replicas:2"] → the API's relayout
    (what is not a number after replicas: goes as it is, for the API to refuse in words)."""
    relayout: dict[str, dict[str, Any]] = {}
    for term in terms:
        node, _, layout = term.partition("=")
        count = layout.removeprefix("replicas:")
        if count != layout:
            relayout[node.strip()] = {"replicas": int(count) if count.isdigit() else count}
        else:
            relayout[node.strip()] = {"mig_config": layout.strip()}
    return relayout


def _plan_lines(window: dict[str, Any]) -> list[str]:
    plan = window.get("relayout_plan") or {}
    lines = [text for _, text in sorted((plan.get("nodes") or {}).items())]
    lines += [f"{row['gpu_type']}: {row['before']} → {row['after']} units"
              for row in plan.get("gpu_types") or []]
    lines += [f"warning: {text}" for text in plan.get("warnings") or []]
    lines += [f"{node}: {entry['state']}" + (f" ({entry['reason']})" if entry["reason"] else "")
              for node, entry in sorted((window.get("relayout_state") or {}).items())]
    return lines


def _emit_window(args: argparse.Namespace, window: dict[str, Any]) -> None:
    fields = ["id", "covers", "start", "end", "reason", "drain", "state", "affected"]
    rows = record({**window, "affected": ",".join(sorted(window["affected"]))}, fields)
    lines = _plan_lines(window)

    def render(out: TextIO) -> None:
        rows(out)
        if lines:
            out.write("re-layout:\n" + "".join(f"  {text}\n" for text in lines))

    emit(args, window, render)


def show(api: PortalClient, args: argparse.Namespace) -> int:
    _emit_window(args, api.get(f"maintenance-windows/{args.id}/"))
    return EXIT_OK


def cancel(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"maintenance-windows/{args.id}/")
    emit(args, {"id": args.id, "cancelled": True},
         line(f"maintenance window {args.id} cancelled"))
    return EXIT_OK
