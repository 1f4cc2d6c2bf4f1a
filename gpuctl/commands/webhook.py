"""`gpuctl webhook add|list|test|delete|enable|confirm`: your webhooks and your project's."""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_API, EXIT_OK, EXIT_WAIT
from ..output import Column, emit, line, print_record, table
from ..parser import Commands, Run
from ..tenants import find_tenant

EXAMPLES = """\
examples:
  gpuctl webhook add https://hooks.slack.com/services/… --kind failed --kind finished
  gpuctl webhook add https://chat.example.org/hooks/… --project   # managers: the project's
  gpuctl webhook test 3"""

WEBHOOK_COLUMNS: list[Column] = [
    ("id", "id"), ("project", "project"), ("kinds", "kinds"),
    ("state", lambda row: row.get("state") or ("active" if row.get("active") else "disabled")),
    ("url", lambda row: row.get("url") or ("(the project's managers')" if row.get("project")
                                           else None))]


def register(commands: Commands) -> None:
    webhook = commands.noun("webhook", "your webhooks and your project's", epilog=EXAMPLES)
    p = webhook.verb("add", add, "add a webhook; its signing secret is printed this once")
    p.add_argument("url", metavar="URL")
    p.add_argument("--project", action="store_true",
                   help="the current project's webhook (its managers and admins)")
    p.add_argument("--kind", action="append", metavar="KIND",
                   help="only this kind (repeatable; default every kind)")

    webhook.verb("list", list_webhooks, "your webhooks and your project's")

    p = webhook.verb("test", test, "send a signed test POST and wait for the receiver's answer")
    p.add_argument("id", type=int)
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for the receiver's answer (default 60); exit 5 "
                        "after it")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                   help="seconds between looks at the delivery (default 1)")

    p = webhook.verb("delete", delete, "delete a webhook")
    p.add_argument("id", type=int)
    p = webhook.verb("enable", change_state("enable"),
                     "enable a webhook disabled after failing deliveries")
    p.add_argument("id", type=int)
    p = webhook.verb("confirm", change_state("confirm"),
                     "confirm a project's webhook whose creator left the role (managers)")
    p.add_argument("id", type=int)


def list_webhooks(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("notifications/webhooks/")
    emit(args, rows, table(rows, WEBHOOK_COLUMNS))
    return EXIT_OK


def add(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"url": args.url, "kinds": args.kind or []}
    if args.project:
        body["tenant"] = find_tenant(api, None)["id"]
    made = api.post("notifications/webhooks/", body)

    def render(out: TextIO) -> None:
        print_record(made, ["id", "project", "kinds", "url", "secret"], out)
        out.write("The secret signs every POST (X-GPU-Portal-Signature); it is shown this "
                  "once.\n")

    emit(args, made, render)
    return EXIT_OK


def delete(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"notifications/webhooks/{args.id}/")
    emit(args, {"id": args.id, "deleted": True}, line(f"webhook {args.id} deleted"))
    return EXIT_OK


def change_state(verb: str) -> Run:
    """enable / confirm: the portal's action of that name; the webhook's state after it."""
    def run(api: PortalClient, args: argparse.Namespace) -> int:
        row = api.post(f"notifications/webhooks/{args.id}/{verb}/")
        emit(args, row, line(f"webhook {row['id']}: {row['state']}"))
        return EXIT_OK
    return run


def test(api: PortalClient, args: argparse.Namespace) -> int:
    """Queue a test POST, then poll its delivery until the workers have the receiver's answer
    (or --timeout: exit 5, the delivery still pending)."""
    delivery = api.post(f"notifications/webhooks/{args.id}/test/")
    deadline = time.monotonic() + args.timeout
    while not delivery["done"] and time.monotonic() < deadline:
        time.sleep(min(args.interval, max(deadline - time.monotonic(), 0.05)))
        delivery = api.get(f"notifications/deliveries/{delivery['id']}/")
    if not delivery["done"]:
        emit(args, delivery, line(
            f"still {delivery['state']} after {args.timeout:g} s (delivery {delivery['id']}; "
            f"gpuctl webhook list shows the webhook's state)"))
        return EXIT_WAIT
    sent = delivery["state"] == "sent"
    emit(args, delivery, line(f"delivered ({delivery['last_status']})" if sent
                              else f"not delivered: {delivery['last_error'] or delivery['state']}"))
    return EXIT_OK if sent else EXIT_API
