"""gpuctl: launch and manage GPU workloads on the GPU portal from a shell or a script.

Credentials are the usual OpenStack ones (source your openrc, or OS_CLOUD for clouds.yaml),
plus GPU_PORTAL_URL. Output is text by default, the API's JSON with --json (or -o json).

This module is the entry: it builds the parser from the noun modules (gpuctl/commands/),
runs the command the arguments name, and turns an error into its exit code (gpuctl/errors.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from . import config as config_mod
from .client import PortalClient
from .commands import NOUNS
from .errors import EXIT_CODES_TEXT, GpuctlError, exit_code
from .parser import Commands, Parser, common_options, parse

DESCRIPTION = """\
Launch and manage GPU workloads on the GPU portal.

Credentials are the usual OpenStack ones: source your openrc, or name a clouds.yaml entry
with OS_CLOUD / --os-cloud; the portal is GPU_PORTAL_URL or --portal-url. Every command
takes --json (the API's own JSON, for scripts) before or after its name."""


def build_parser() -> Parser:
    parser = Parser(prog="gpuctl", parents=[common_options(suppress=False)],
                    description=DESCRIPTION,
                    epilog=f"{EXIT_CODES_TEXT}\n\n`gpuctl COMMAND --help` says more of each.")
    sub = parser.add_subparsers(metavar="COMMAND", required=True,
                                parser_class=Parser, title="commands")
    commands = Commands(sub, common_options(suppress=True))
    for noun in NOUNS:
        noun.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, *, env: dict[str, str] | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:  # --help (0) or a usage error (2), written where this run writes
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parse(build_parser(), argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    args.out, args.err = out, err
    args.environ = dict(os.environ if env is None else env)
    try:
        cfg = config_mod.load(env=env, cloud=args.os_cloud, portal_url=args.portal_url)
        with contextlib.closing(PortalClient(cfg, timeout=args.http_timeout)) as api:
            code: int = args.func(api, args)
            return code
    except GpuctlError as exc:  # the configuration's, Keystone's, the API's, a wait's
        err.write(f"gpuctl: {exc}\n")
        return exit_code(exc.category)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
