"""What a launch mounts: `mounts: [{volume: id, path, read_only?}]`, resolved to claims, and
a batch job's checkpoint directory: `checkpoint: {volume: id, path?}`, a folder of a volume.

A mount names its source by one key (`volume` today; a mount source is one entry of
MOUNT_SOURCES, so another kind of source, such as a published dataset, is one more entry); the
resolver checks the source for the caller and the tenant, the path for the pod, and answers a
ResolvedMount with the claim to mount. Refusals are field errors of `mounts` (LaunchInvalid),
each naming the entry by its place in the list.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from access.ssh_server import BIN_DIR, CONFIG_DIR
from core.validation import excerpt
from identity.identity import Identity
from storage.models import Volume
from storage.selectors import volumes_mountable
from tenants.models import Tenant

from .manifests import CHECKPOINT_MOUNT_PATH, HOME_MOUNT_PATH, MPI_SSH_PATH

MAX_MOUNTS = 16
MAX_PATH = 1024
# where a volume may not go: the system's own trees, and the paths the portal mounts itself
SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                "/run", "/sbin", "/sys", "/usr", "/var/run", "/var/lib/kubelet")
PORTAL_PATHS = (HOME_MOUNT_PATH, MPI_SSH_PATH, BIN_DIR, CONFIG_DIR, CHECKPOINT_MOUNT_PATH)


class MountRefused(ValueError):
    """One mount entry refused: the message says why."""


@dataclasses.dataclass(frozen=True)
class ResolvedMount:
    volume: Volume
    path: str
    read_only: bool

    def as_spec(self) -> dict[str, Any]:
        """As the launch spec freezes it (launch_spec.py)."""
        return {"volume": self.volume.pk, "name": self.volume.name,
                "claim": self.volume.claim_name, "path": self.path, "read_only": self.read_only}


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def mount_path_clean(path: Any) -> str:
    """An absolute, normalised path outside the system's trees and the portal's own mounts."""
    if not isinstance(path, str) or not path:
        raise MountRefused("Give the path to mount it at.")
    if len(path) > MAX_PATH or not path.isprintable() or "\\" in path:
        raise MountRefused(f"A path of at most {MAX_PATH} printable characters, please.")
    if not path.startswith("/"):
        raise MountRefused(f"{path!r} is not an absolute path.")
    if ".." in path.split("/"):
        raise MountRefused(f"{path!r} holds '..'.")
    clean = posixpath.normpath(path)
    if clean == "/" or any(_under(clean, tree) for tree in SYSTEM_PATHS):
        raise MountRefused(f"{clean} is a system path; mount it elsewhere (e.g. /data).")
    if any(_under(clean, own) or _under(own, clean) for own in PORTAL_PATHS):
        raise MountRefused(f"{clean} is where the portal mounts its own volumes.")
    return clean


def _volume_source(value: Any, *, identity: Identity, tenant: Tenant) -> Volume:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MountRefused("`volume` is a volume's id.")
    volume = volumes_mountable(identity, tenant).filter(pk=value).first()
    if volume is None:
        raise MountRefused(f"No volume {value} that you may mount in {tenant.name} "
                           "(or it failed).")
    return volume


# the keys that name a mount's source (one per mount); _source resolves each
MOUNT_SOURCES = ("volume",)


def _source(key: str, value: Any, *, identity: Identity, tenant: Tenant) -> Volume:
    match key:
        case "volume":
            return _volume_source(value, identity=identity, tenant=tenant)
    raise MountRefused(f"unknown source {key!r}.")


def mounts_resolve(entries: Any, *, identity: Identity, tenant: Tenant,
                   use_home: bool = False) -> list[ResolvedMount]:
    """Every mount entry resolved, or MountsInvalid with what is wrong with each."""
    if entries in (None, ""):
        return []
    if not isinstance(entries, list):
        raise MountsInvalid(["A list of mounts, please."])
    if len(entries) > MAX_MOUNTS:
        raise MountsInvalid([f"At most {MAX_MOUNTS} mounts."])
    errors: list[str] = []
    resolved: list[ResolvedMount] = []
    paths: set[str] = {HOME_MOUNT_PATH} if use_home else set()
    volumes: set[int] = set()
    for index, entry in enumerate(entries):
        try:
            mount = _entry(entry, identity=identity, tenant=tenant)
            if mount.path in paths:
                raise MountRefused(f"{mount.path} is mounted twice.")
            if mount.volume.pk in volumes:
                raise MountRefused(f"volume {mount.volume.pk} is mounted twice.")
        except MountRefused as exc:
            errors.append(f"mount {index + 1}: {exc}")
            continue
        paths.add(mount.path)
        volumes.add(mount.volume.pk)
        resolved.append(mount)
    if errors:
        raise MountsInvalid(errors)
    return resolved


def _entry(entry: Any, *, identity: Identity, tenant: Tenant) -> ResolvedMount:
    if not isinstance(entry, Mapping):
        raise MountRefused("Each mount is an object: {volume, path, read_only?}.")
    sources = [key for key in MOUNT_SOURCES if key in entry]
    unknown = set(entry) - set(MOUNT_SOURCES) - {"path", "read_only"}
    if unknown:
        raise MountRefused(f"unknown key(s): {', '.join(sorted(map(str, unknown)))[:100]}.")
    if len(sources) != 1:
        raise MountRefused(f"Name one source: {' or '.join(MOUNT_SOURCES)}.")
    read_only = entry.get("read_only", False)
    if not isinstance(read_only, bool):
        raise MountRefused("read_only is true or false.")
    path = mount_path_clean(entry.get("path"))
    volume = _source(sources[0], entry[sources[0]], identity=identity, tenant=tenant)
    return ResolvedMount(volume=volume, path=path, read_only=read_only)


# a checkpoint's folder on its volume: relative, made of plain names
CHECKPOINT_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
MAX_CHECKPOINT_FOLDER = 255
CHECKPOINTS_FOLDER = "checkpoints"  # where a launch's own folder goes when it names none


@dataclasses.dataclass(frozen=True)
class ResolvedCheckpoint:
    """A batch job's checkpoint directory: a folder of a volume it may mount. `folder` empty:
    the launch's own, `checkpoints/<its object name>`, named at admission (checkpoint_folder)."""

    volume: Volume
    folder: str = ""

    def as_spec(self, object_name: str) -> dict[str, Any]:
        """As the launch spec freezes it (launch_spec.py): a requeued copy keeps the folder."""
        return {"volume": self.volume.pk, "name": self.volume.name,
                "claim": self.volume.claim_name,
                "folder": self.folder or f"{CHECKPOINTS_FOLDER}/{object_name}"}


def checkpoint_resolve(entry: Any, *, identity: Identity, tenant: Tenant,
                       kind: str) -> ResolvedCheckpoint | None:
    """`checkpoint: {volume, path?}` resolved: a volume the caller may mount (never a dataset:
    it is read-only), a folder of it, on a batch job only (a service is not requeued); or
    MountsInvalid with what is wrong."""
    if entry in (None, "", {}):
        return None
    if not isinstance(entry, Mapping):
        raise MountsInvalid(["A checkpoint is an object: {volume, path?}."])
    unknown = set(entry) - {"volume", "path"}
    if unknown:
        named = ", ".join(sorted(map(str, unknown)))[:100]
        raise MountsInvalid([f"unknown key(s): {named}; a checkpoint goes on a volume "
                             "(a dataset is read-only)."])
    if kind != "batch":
        raise MountsInvalid(["A checkpoint directory is a batch job's: a service is never "
                             "requeued, so it has nothing to resume."])
    if "volume" not in entry:
        raise MountsInvalid(["Name the volume the checkpoints go on: {volume: id}."])
    folder = entry.get("path") or ""
    if not isinstance(folder, str):
        raise MountsInvalid(["`path` is a folder of the volume, e.g. runs/llama."])
    folder = folder.strip("/")
    if folder and (len(folder) > MAX_CHECKPOINT_FOLDER or not CHECKPOINT_FOLDER.fullmatch(folder)
                   or ".." in folder.split("/")):
        raise MountsInvalid([f"`path` is a folder of the volume (at most "
                             f"{MAX_CHECKPOINT_FOLDER} characters: letters, digits, ._- and /, "
                             f"no '..'), not {excerpt(folder)}."])
    try:
        volume = _volume_source(entry["volume"], identity=identity, tenant=tenant)
    except MountRefused as exc:
        raise MountsInvalid([str(exc)]) from exc
    return ResolvedCheckpoint(volume=volume, folder=folder)


class MountsInvalid(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
