"""`gpuctl whoami`: who the portal takes you for."""

from __future__ import annotations

import argparse

from ..client import PortalClient
from ..errors import EXIT_OK
from ..output import emit, record
from ..parser import Commands


def register(commands: Commands) -> None:
    commands.command("whoami", whoami, "who the portal thinks you are: user, project, role")


def whoami(api: PortalClient, args: argparse.Namespace) -> int:
    me = api.get("me/")
    emit(args, me, record({**me, "project": (me.get("project") or {}).get("name")},
                          ["user_name", "user_id", "domain", "project", "role", "is_admin",
                           "namespace", "token_expires_at"]))
    return EXIT_OK
