"""What a caller does with a volume's files, through the project's file server: list,
download, upload, delete, make a folder, move. Each makes sure the server runs (started on
demand), sends the request on (files/forwarding.py) and, for a change, writes an audit record
once the server did it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import urllib3

from audit.services import audit_record
from identity.models import User

from . import forwarding, volumes
from .forwarding import FilesError
from .manifests import ClaimMount
from .server import FileServer, file_server_ensure
from .volumes import VolumeFiles, VolumeRefused


def _server(volume: VolumeFiles) -> FileServer:
    """The project's file server, mounting every claim of the project (this one included)."""
    if not volume.bound:
        raise FilesError(409, "volume_not_bound", "The volume is not bound yet: its files can "
                         "be reached once the cluster has made its storage (its state says "
                         "why it waits).")
    claims = volumes.project_claims(volume.tenant)
    if all(mount.claim != volume.claim for mount in claims):
        claims = [*claims, ClaimMount(volume.claim, read_only=not volume.writable)]
    return file_server_ensure(tenant=volume.tenant, claims=claims)


def _writable(volume: VolumeFiles) -> None:
    if not volume.writable:
        raise VolumeRefused("You may read this volume's files, not change them.")


def _audit(user: User, volume: VolumeFiles, action: str, target: str,
           after: dict[str, Any] | None = None) -> None:
    audit_record(actor=user, action=f"files.{action}", tenant=volume.tenant,
                 target=f"{volume.claim}:{target}", after=after)


def files_list(*, volume: VolumeFiles, path: str) -> list[dict[str, Any]]:
    server = _server(volume)
    entries: list[dict[str, Any]] = forwarding.read_json(
        forwarding.send(server, "GET", "files", volume.claim, {"path": path}))
    return entries


def files_download(*, volume: VolumeFiles, path: str, headers: Mapping[str, str]
                   ) -> tuple[urllib3.BaseHTTPResponse, Iterator[bytes]]:
    """The server's response (status and headers to pass on) and its body, streamed."""
    server = _server(volume)
    response = forwarding.send(server, "GET", "content", volume.claim, {"path": path},
                               headers=headers)
    return response, forwarding.stream(server, response)


def files_upload(*, user: User, volume: VolumeFiles, path: str,
                 body: forwarding.UploadBody) -> dict[str, Any]:
    """Write the body (streamed on as it comes) to `path`; the file as listed."""
    _writable(volume)
    server = _server(volume)
    entry: dict[str, Any] = forwarding.upload(server, volume.claim, {"path": path}, body)
    _audit(user, volume, "upload", path, {"size": entry.get("size")})
    return entry


def files_delete(*, user: User, volume: VolumeFiles, path: str, recursive: bool) -> None:
    _writable(volume)
    params = {"path": path, **({"recursive": "true"} if recursive else {})}
    forwarding.send(_server(volume), "DELETE", "content", volume.claim, params).release_conn()
    _audit(user, volume, "delete", path, {"recursive": recursive})


def files_folder_make(*, user: User, volume: VolumeFiles, path: str) -> dict[str, Any]:
    _writable(volume)
    entry: dict[str, Any] = forwarding.read_json(
        forwarding.send(_server(volume), "POST", "folders", volume.claim, {"path": path}))
    _audit(user, volume, "folder", path)
    return entry


def files_move(*, user: User, volume: VolumeFiles, source: str, target: str) -> dict[str, Any]:
    _writable(volume)
    entry: dict[str, Any] = forwarding.read_json(forwarding.send(
        _server(volume), "POST", "moves", volume.claim, {"from": source, "to": target}))
    _audit(user, volume, "move", source, {"to": target})
    return entry


__all__ = ["FilesError", "files_delete", "files_download", "files_folder_make", "files_list",
           "files_move", "files_upload"]
