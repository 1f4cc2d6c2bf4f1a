"""`gpuctl notifications list|read|preferences`: the bell's notifications and where each kind
is sent."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import Column, age, emit, line, table
from ..parser import Commands

EXAMPLES = """\
examples:
  gpuctl notifications --unread
  gpuctl notifications read 17            # or --all
  gpuctl notifications preferences --set started.email=on --set queued.webhook=off"""

NOTIFICATION_COLUMNS: list[Column] = [
    ("id", "id"), ("read", "read"), ("kind", "kind"), ("title", "title"), ("project", "project"),
    ("workload", "workload"), ("age", age)]


def register(commands: Commands) -> None:
    notifications = commands.noun("notifications", "your notifications (the bell's)",
                                  default_verb="list", epilog=EXAMPLES)
    p = notifications.verb("list", list_notifications, "your notifications, newest first")
    p.add_argument("--unread", action="store_true", help="only unread ones")
    p.add_argument("--kind", help="one kind (failed, finished, idle_warning …)")
    p.add_argument("--limit", type=int, help="at most this many")

    p = notifications.verb("read", read, "mark a notification read, or every one")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", type=int, metavar="ID", help="the notification's id")
    which.add_argument("--all", action="store_true", help="mark every one read")

    p = notifications.verb("preferences", preferences,
                           "which kinds go to which channel; --set changes one")
    p.add_argument("--set", action="append", type=preference, metavar="KIND.CHANNEL=on|off",
                   help="change one (repeatable); channels: portal, email, webhook")


def preference(text: str) -> tuple[str, str, bool]:
    """KIND.CHANNEL=on|off → (kind, channel, on)."""
    name, _, value = text.partition("=")
    kind, _, channel = name.partition(".")
    if not kind or not channel or value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"{text!r}: write KIND.CHANNEL=on|off, e.g. "
                                         "started.email=on")
    return kind, channel, value == "on"


def list_notifications(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("notifications/", unread="true" if args.unread else None,
                       kind=args.kind, limit=args.limit)
    emit(args, rows, table(rows, NOTIFICATION_COLUMNS))
    return EXIT_OK


def read(api: PortalClient, args: argparse.Namespace) -> int:
    if args.all:
        marked = api.post("notifications/read-all/")
        emit(args, marked, line(f"{marked['marked']} marked read"))
    else:
        row = api.post(f"notifications/{args.id}/read/")
        emit(args, row, line(f"notification {row['id']} read"))
    return EXIT_OK


def preferences(api: PortalClient, args: argparse.Namespace) -> int:
    if args.set:
        change: dict[str, dict[str, bool]] = {}
        for kind, channel, on in args.set:
            change.setdefault(kind, {})[channel] = on
        chosen: dict[str, Any] = api.put("notifications/preferences/", change)
    else:
        chosen = api.get("notifications/preferences/")
    channels = list(next(iter(chosen.values()), {}))
    rows = [{"kind": kind, **{c: "on" if on else "off" for c, on in by_channel.items()}}
            for kind, by_channel in chosen.items()]
    emit(args, chosen, table(rows, [("kind", "kind"), *[(c, c) for c in channels]]))
    return EXIT_OK
