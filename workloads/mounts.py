"""What a launch mounts: `mounts: [{volume: id, path, read_only?}]`, resolved to claims.

A mount names its source by one key (`volume` today; a mount source is one entry of
MOUNT_SOURCES, so another kind of source, such as a published dataset, is one more entry); the
resolver checks the source for the caller and the tenant, the path for the pod, and answers a
ResolvedMount with the claim to mount. Refusals are field errors of `mounts` (LaunchInvalid),
each naming the entry by its place in the list.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping
from typing import Any

from access.ssh_server import BIN_DIR, CONFIG_DIR
from core.validation import CONTAINER_SYSTEM_PATHS, path_overlaps
from identity.identity import Identity
from storage.models import Volume
from storage.selectors import volumes_mountable
from tenants.models import Tenant

from .manifests import HOME_MOUNT_PATH, MPI_SSH_PATH

MAX_MOUNTS = 16
MAX_PATH = 1024
PORTAL_PATHS = (HOME_MOUNT_PATH, MPI_SSH_PATH, BIN_DIR, CONFIG_DIR)


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
    system = next((tree for tree in CONTAINER_SYSTEM_PATHS if path_overlaps(clean, tree)), None)
    if clean == "/" or system:
        covered = f"overlaps {system}, which" if system else "would hide all"
        raise MountRefused(f"{clean} is a system path: it {covered} the container needs; mount "
                           "it elsewhere (e.g. /data).")
    if any(path_overlaps(clean, own) for own in PORTAL_PATHS):
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


class MountsInvalid(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
