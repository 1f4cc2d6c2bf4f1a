"""`gpuctl price show|set`: the site's prices (every signed-in user reads them; admins set
them): per GPU type and hour (per GPU-equivalent for a shared type), per CPU-hour and per
GiB-month of storage, each sheet in force from its day until the next one's."""

from __future__ import annotations

import argparse
import io
from decimal import Decimal, InvalidOperation
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, print_table
from ..parser import Commands, key_value

EXAMPLES = """\
examples:
  gpuctl price
  gpuctl price set --from 2026-12-01 --gpu a100=2.50 --gpu t4-shared=0.40 --cpu-hour 0.02 \\
      --storage-gib-month 0.05"""


def amount(text: str) -> str:
    """A price as written (a decimal number, never read through a float)."""
    try:
        Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r}: a decimal number, e.g. 2.50") from None
    return text


def register(commands: Commands) -> None:
    price = commands.noun("price", "the site's prices per GPU type, CPU-hour and GiB-month",
                          default_verb="show", epilog=EXAMPLES)
    price.verb("show", show, "the prices in force and their history")
    p = price.verb("set", set_prices, "set the prices from a day on (admins): the day's "
                                      "sheet is replaced whole")
    p.add_argument("--from", dest="effective_from", metavar="YYYY-MM-DD",
                   help="the first day they apply (default today; never in a closed month)")
    p.add_argument("--gpu", action="append", type=key_value(amount, "GPU_TYPE=PRICE"),
                   metavar="GPU_TYPE=PRICE",
                   help="per GPU-equivalent and hour (repeatable; a type left out is not "
                        "charged)")
    p.add_argument("--cpu-hour", type=amount, metavar="PRICE", help="per CPU core and hour")
    p.add_argument("--storage-gib-month", type=amount, metavar="PRICE",
                   help="per GiB held a whole month")


def show(api: PortalClient, args: argparse.Namespace) -> int:
    return _shown(args, api.get("prices/"))


def set_prices(api: PortalClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"gpu": dict(args.gpu or []), "cpu_hour": args.cpu_hour,
                            "storage_gib_month": args.storage_gib_month}
    if args.effective_from:
        body["effective_from"] = args.effective_from
    return _shown(args, api.put("prices/", body))


def _shown(args: argparse.Namespace, prices: dict[str, Any]) -> int:
    def render(out: TextIO) -> None:
        out.write(prices_text(prices))

    emit(args, prices, render)
    return EXIT_OK


def prices_text(prices: dict[str, Any]) -> str:
    """Each sheet, newest first: its day, GPU prices, CPU-hour and GiB-month."""
    out = io.StringIO()
    currency = prices["currency"]
    if not prices["sheets"]:
        out.write("no prices: nothing is charged\n")
        return out.getvalue()
    in_force = (prices.get("in_force") or {}).get("effective_from")
    rows = [{"from": sheet["effective_from"] + (" (in force)" if sheet["effective_from"]
                                                == in_force else ""),
             "gpu": ", ".join(f"{slug} {price}" for slug, price in sheet["gpu"].items()) or "-",
             "cpu_hour": sheet["cpu_hour"], "storage_gib_month": sheet["storage_gib_month"]}
            for sheet in prices["sheets"]]
    print_table(rows, [("FROM", "from"), (f"GPU-HOUR ({currency})", "gpu"),
                       ("CPU-HOUR", "cpu_hour"), ("GIB-MONTH", "storage_gib_month")], out)
    return out.getvalue()
