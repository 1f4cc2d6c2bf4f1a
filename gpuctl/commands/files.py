"""`gpuctl files ls|get|put|rm|mkdir|mv VOLUME:PATH`: the files of a volume, through the
portal (its file server, started on demand). VOLUME is the volume's id or its name; PATH is
inside it (the top when left out). Transfers are streamed both ways, never held whole."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..client import PortalClient
from ..errors import EXIT_OK, GpuctlError
from ..output import Column, emit, line, table
from ..parser import Commands

CHUNK = 1 << 20
EXAMPLES = """\
examples:
  gpuctl files ls data:runs/
  gpuctl files put weights.pt data:runs/epoch-3/      # into the folder, same name
  gpuctl files get data:runs/epoch-3/weights.pt ./weights.pt
  gpuctl files get 7:logs/train.log -                  # to standard output
  gpuctl files rm data:runs/epoch-1 --recursive"""

ENTRY_COLUMNS: list[Column] = [
    ("name", lambda row: row["name"] + ("/" if row["type"] == "directory" else "")),
    ("type", "type"), ("size", "size"), ("modified", "modified")]


class LocalFileError(GpuctlError):
    category = "usage"


def register(commands: Commands) -> None:
    files = commands.noun("files", "the files of a volume", epilog=EXAMPLES)
    p = files.verb("ls", list_files, "a folder's files and folders")
    p.add_argument("target", metavar="VOLUME[:PATH]")
    p = files.verb("get", get, "download a file")
    p.add_argument("target", metavar="VOLUME:PATH")
    p.add_argument("dest", nargs="?", metavar="DEST",
                   help="a file or folder here (default: the file's name here; - for stdout)")
    p = files.verb("put", put, "upload a file (replacing one of the same name)")
    p.add_argument("source", metavar="SOURCE", help="a local file")
    p.add_argument("target", metavar="VOLUME:PATH",
                   help="where in the volume (a path ending in / is a folder: the same name)")
    p = files.verb("rm", remove, "delete a file or an empty folder")
    p.add_argument("target", metavar="VOLUME:PATH")
    p.add_argument("-r", "--recursive", action="store_true",
                   help="delete a folder with everything in it")
    p = files.verb("mkdir", mkdir, "make a folder")
    p.add_argument("target", metavar="VOLUME:PATH")
    p = files.verb("mv", move, "rename or move inside the volume")
    p.add_argument("target", metavar="VOLUME:PATH")
    p.add_argument("to", metavar="PATH", help="the new path in the same volume")


def split_target(text: str) -> tuple[str, str]:
    """VOLUME:PATH → (volume, path); no colon: the volume's top."""
    volume, _, path = text.partition(":")
    if not volume:
        raise argparse.ArgumentTypeError(f"{text!r}: VOLUME:PATH, the volume first")
    return volume, path


def volume_id(api: PortalClient, volume: str) -> int:
    """The id of a volume given by id or by name (among those the caller sees)."""
    if volume.isascii() and volume.isdigit():
        return int(volume)
    found = [row for row in api.get_all("volumes/") if row.get("name") == volume]
    if len(found) != 1:
        raise LocalFileError(f"no volume named {volume!r}" if not found
                             else f"{len(found)} volumes are named {volume!r}: give the id")
    return int(found[0]["id"])


def _target(api: PortalClient, text: str) -> tuple[str, str]:
    volume, path = split_target(text)
    return f"volumes/{volume_id(api, volume)}/files/", path


def list_files(api: PortalClient, args: argparse.Namespace) -> int:
    base, path = _target(api, args.target)
    rows = api.request("GET", base, params={"path": path}).json()
    emit(args, rows, table(rows, ENTRY_COLUMNS))
    return EXIT_OK


def get(api: PortalClient, args: argparse.Namespace) -> int:
    base, path = _target(api, args.target)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise LocalFileError("get takes a file's path: VOLUME:PATH")
    to_stdout = args.dest == "-"
    dest = Path(args.dest or name)
    if not to_stdout and dest.is_dir():
        dest = dest / name
    size = 0
    with api.stream("GET", base + "content", params={"path": path}) as response:
        if to_stdout:
            out = sys.stdout.buffer
            for piece in response.iter_bytes(CHUNK):
                out.write(piece)
                size += len(piece)
            out.flush()
            return EXIT_OK
        # written beside the destination and renamed once whole: an interrupted download
        # never leaves half a file under the name
        fd, partial = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent or ".")
        try:
            with os.fdopen(fd, "wb") as f:
                for piece in response.iter_bytes(CHUNK):
                    f.write(piece)
                    size += len(piece)
            os.replace(partial, dest)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    result = {"path": str(dest), "size": size}
    emit(args, result, line(f"{dest} ({size} bytes)"))
    return EXIT_OK


def pieces(f: BinaryIO) -> Iterator[bytes]:
    while piece := f.read(CHUNK):
        yield piece


def put(api: PortalClient, args: argparse.Namespace) -> int:
    source = Path(args.source)
    if not source.is_file():
        raise LocalFileError(f"{source}: not a file")
    base, path = _target(api, args.target)
    if not path or path.endswith("/"):
        path += source.name
    with open(source, "rb") as f:
        length = os.fstat(f.fileno()).st_size
        with api.stream("PUT", base + "content", params={"path": path}, content=pieces(f),
                        headers={"Content-Type": "application/octet-stream",
                                 "Content-Length": str(length)}) as response:
            row = json.loads(response.read())
    emit(args, row, line(f"{args.target.split(':', 1)[0]}:{path} ({row['size']} bytes)"))
    return EXIT_OK


def remove(api: PortalClient, args: argparse.Namespace) -> int:
    base, path = _target(api, args.target)
    params = {"path": path, **({"recursive": "true"} if args.recursive else {})}
    api.request("DELETE", base + "content", params=params)
    emit(args, {"deleted": path}, line(f"deleted {path}"))
    return EXIT_OK


def mkdir(api: PortalClient, args: argparse.Namespace) -> int:
    base, path = _target(api, args.target)
    row = api.post(base + "folders/", {"path": path})
    emit(args, row, line(f"made {path}/"))
    return EXIT_OK


def move(api: PortalClient, args: argparse.Namespace) -> int:
    base, path = _target(api, args.target)
    row = api.post(base + "moves/", {"from": path, "to": args.to})
    emit(args, row, line(f"{path} → {args.to}"))
    return EXIT_OK

