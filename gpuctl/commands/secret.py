"""`gpuctl secrets ls|create|set|rm`: your secrets and your project's, and how `gpuctl launch
--secret` names them. A value is read from a file or from stdin, never from an argument: the
arguments of a command are there for every user of the machine to read (`ps`, /proc)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK, GpuctlError
from ..output import Column, emit, line, print_record, table
from ..parser import Commands

KINDS = ("env", "file", "registry", "s3")
VALUES_HELP = """\
where the values come from (never from an argument: every user of the machine sees a
command's arguments in `ps`):
  env       KEY=value lines (a .env file), from --from-file PATH or stdin
  registry  server=…, username=… and password=… lines, from --from-file PATH or stdin
  s3        endpoint=…, bucket=…, access_key=…, secret_key=… (and region=…) lines, from
            --from-file PATH or stdin
  file      each --from-file PATH a file of the secret (its name: the file's), or stdin
            with --file-name NAME"""
EXAMPLES = f"""\
examples:
  gpuctl secrets create hf --kind env < hf.env            # HF_TOKEN=… in hf.env
  gpuctl secrets create certs --kind file --from-file ca.pem --from-file client.pem
  gpuctl secrets create team --kind registry --project < registry.txt   # managers
  gpuctl secrets set hf --from-file hf.env
  gpuctl launch --template jupyter --gpu-type a100 --secret hf --secret certs:/etc/ssl/mine

{VALUES_HELP}"""

SECRET_COLUMNS: list[Column] = [
    ("id", "id"), ("name", "name"), ("kind", "kind"),
    ("whose", lambda row: "the project's" if row.get("scope") == "project" else "yours"),
    ("keys", lambda row: ", ".join(row.get("keys") or [])), ("owner", "owner")]
SECRET_FIELDS = ["id", "name", "kind", "scope", "keys", "tenant", "owner", "created_at",
                 "updated_at"]


class SecretValuesInvalid(GpuctlError):
    category = "usage"


def register(commands: Commands) -> None:
    secrets = commands.noun("secrets", "your secrets and your project's (values never shown)",
                            epilog=EXAMPLES)
    secrets.verb("ls", list_secrets, "your secrets and the project's: names, kinds, keys")

    p = secrets.verb("create", create, "make a secret; its values from a file or stdin",
                     epilog=VALUES_HELP)
    p.add_argument("name", metavar="NAME", help="lower-case letters, digits and hyphens")
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--project", action="store_true",
                   help="the project's (its managers make these; its members use them); "
                        "default: yours alone")
    values_options(p)

    p = secrets.verb("set", replace, "replace a secret's values whole (from a file or stdin)",
                     epilog=VALUES_HELP)
    p.add_argument("secret", metavar="NAME|ID")
    values_options(p)

    p = secrets.verb("rm", remove, "delete a secret and its values")
    p.add_argument("secret", metavar="NAME|ID")


def values_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-file", action="append", metavar="PATH", type=Path,
                   help="read the values from this file (file secrets: repeatable, one file "
                        "each); without it, from stdin")
    p.add_argument("--file-name", metavar="NAME",
                   help="file secrets read from stdin: the file's name in the secret")


def list_secrets(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get_all("secrets/")
    emit(args, rows, table(rows, SECRET_COLUMNS))
    return EXIT_OK


def key_value_lines(text: str) -> dict[str, str]:
    """KEY=value lines (blank lines and # comments left out) → a map; an error names the line,
    never its value."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise SecretValuesInvalid(f"line {number} is not KEY=value")
        values[key.strip()] = value
    return values


def read_values(kind: str, args: argparse.Namespace, stdin: TextIO | None = None) -> dict[str, str]:
    """The secret's data, as the API takes it, from --from-file or stdin."""
    stdin = stdin or sys.stdin
    paths: list[Path] = args.from_file or []
    if kind == "file":
        if paths:
            if args.file_name:
                raise SecretValuesInvalid("--file-name names a file read from stdin; with "
                                          "--from-file, the file's own name is used")
            return {path.name: path.read_text() for path in paths}
        if not args.file_name:
            raise SecretValuesInvalid("a file secret read from stdin needs --file-name")
        return {args.file_name: stdin.read()}
    if args.file_name:
        raise SecretValuesInvalid("--file-name is for file secrets")
    if len(paths) > 1:
        raise SecretValuesInvalid(f"a {kind} secret reads one --from-file")
    text = paths[0].read_text() if paths else stdin.read()
    return key_value_lines(text)


def find_secret(api: PortalClient, named: str) -> dict[str, Any]:
    """A secret the caller sees, by id or by name (yours and the project's: a name both have
    is ambiguous, and the error lists their ids)."""
    rows = api.get_all("secrets/")
    if named.isascii() and named.isdigit():
        found = [row for row in rows if row["id"] == int(named)]
    else:
        found = [row for row in rows if row["name"] == named]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SecretNotFound(f"no secret {named} (gpuctl secrets ls lists yours and the "
                             "project's)")
    raise SecretValuesInvalid(f"{named} names several secrets: "
                              + ", ".join(f"id {row['id']} ({row['scope']})" for row in found)
                              + "; name one by its id")


class SecretNotFound(GpuctlError):
    category = "not_found"


def create(api: PortalClient, args: argparse.Namespace) -> int:
    data = read_values(args.kind, args)
    made = api.post("secrets/", {"name": args.name, "kind": args.kind,
                                 "scope": "project" if args.project else "user", "data": data})
    emit(args, made, lambda out: print_record(made, SECRET_FIELDS, out))
    return EXIT_OK


def replace(api: PortalClient, args: argparse.Namespace) -> int:
    secret = find_secret(api, args.secret)
    data = read_values(secret["kind"], args)
    changed = api.put(f"secrets/{secret['id']}/", {"data": data})
    emit(args, changed, lambda out: print_record(changed, SECRET_FIELDS, out))
    return EXIT_OK


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    secret = find_secret(api, args.secret)
    api.delete(f"secrets/{secret['id']}/")
    emit(args, {"id": secret["id"], "deleted": True},
         line(f"secret {secret['name']} ({secret['id']}) deleted"))
    return EXIT_OK


def launch_secrets(api: PortalClient, named: list[str]) -> list[dict[str, Any]]:
    """`--secret NAME[:PATH]` (or ID[:PATH]) → the launch's [{secret: id, path?}]."""
    refs = []
    for word in named:
        name, sep, path = word.partition(":")
        ref: dict[str, Any] = {"secret": find_secret(api, name)["id"]}
        if sep:
            ref["path"] = path
        refs.append(ref)
    return refs
