"""`gpuctl logs`: a workload's last log lines, or a rank's of a distributed one; --follow
keeps printing new ones until it ends."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit
from ..parser import Commands
from .workload import FINAL_STATES


def register(commands: Commands) -> None:
    p = commands.command("logs", logs, "the last log lines of a workload",
                         epilog="examples:\n  gpuctl logs 42 --follow\n"
                                "  gpuctl logs 43 --rank launcher   # mpirun's output")
    p.add_argument("id", type=int)
    p.add_argument("--tail", type=int, default=100, help="lines (default 100, at most 10000)")
    p.add_argument("--rank", type=rank_value, metavar="N|launcher",
                   help="a distributed workload's rank (0, 1, …) or the MPI launcher "
                        "(default: what the portal shows first)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines (as text) until the workload ends (polls)")
    p.add_argument("--timeout", type=float, default=0, metavar="SECONDS",
                   help="stop following after this long (default 0: until the workload ends)")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                   help="polling interval (default 2)")


def rank_value(text: str) -> str:
    if text == "launcher" or (text.isascii() and text.isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: a rank number (0, 1, …) or launcher")


def logs(api: PortalClient, args: argparse.Namespace) -> int:
    def read() -> list[str]:
        # a distributed workload's rank (or the MPI launcher); the API's default without it
        lines: list[str] = api.get(f"workloads/{args.id}/logs/", tail=args.tail,
                                   rank=args.rank)["lines"]
        return lines

    def write(lines: list[str], out: TextIO) -> None:
        out.writelines(f"{line}\n" for line in lines)
        out.flush()

    lines = read()
    if not args.follow:
        emit(args, {"lines": lines}, lambda out: write(lines, out))
        return EXIT_OK
    write(lines, args.out)  # a stream: text, whatever --json says
    deadline = time.monotonic() + args.timeout if args.timeout else None
    while True:
        state = api.get(f"workloads/{args.id}/")["state"]
        time.sleep(args.interval)
        current = read()
        write(new_lines(lines, current), args.out)
        lines = current
        if state in FINAL_STATES:
            break  # one last read after the end, then stop
        if deadline is not None and time.monotonic() >= deadline:
            break
    return EXIT_OK


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """The lines of `current` after its overlap with the end of `previous` (a polled tail)."""
    if not previous:
        return current
    for start in range(len(current), 0, -1):
        overlap = current[:start]
        if len(overlap) <= len(previous) and previous[-len(overlap):] == overlap:
            return current[start:]
    return current
