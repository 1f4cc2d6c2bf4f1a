"""The portal's side of a file request: sent on to the project's file server with its bearer
token, streamed both ways, and its refusals turned into the API's errors.

Nothing is held whole. An upload's length is declared and bounded by
PORTAL_FILES_MAX_UPLOAD_BYTES before a byte is sent; where the web server hands the body over
on the client's socket (gunicorn, as deployed: core/body_socket.py) it is spliced on to the
server in the kernel, never coming up to the interpreter; elsewhere it goes on in pieces of
UPLOAD_PIECE bytes as the client sends them. A download comes back in pieces as the server
sends them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3
from django.conf import settings
from django.http import HttpRequest
from urllib3.connection import HTTPConnection

from core.body_socket import BodySocket, SpliceError, TargetFailed, body_socket, splice_body

from .server import FileServer, file_server_forget, file_server_used

log = logging.getLogger(__name__)

CHUNK = 1 << 20
# an upload read through the interpreter goes on in pieces of this size: sent on in 1 MiB
# pieces, a 1 GiB upload took twice as long to send as in 64 KiB ones (bench/results/files.md);
# smaller pieces are more turns at the interpreter's lock, each a wait when it is contended
UPLOAD_PIECE = 256 * 1024
# the headers of a download that the client gets as the server sent them
DOWNLOAD_HEADERS = ("Content-Type", "Content-Length", "Content-Range", "Content-Disposition",
                    "Accept-Ranges", "Last-Modified", "ETag", "X-Content-Type-Options")
# what a client's download request may carry on to the server
REQUEST_HEADERS = ("Range", "If-Range", "If-Modified-Since", "If-None-Match")
# connect: the Service answers at once or not at all; read: an upload is answered once the
# whole file is on the volume's disk (synced), which may take a while for a large one
TIMEOUT = urllib3.Timeout(connect=5.0, read=600.0)

_pool = urllib3.PoolManager(num_pools=64, maxsize=16, retries=False, timeout=TIMEOUT)


class FilesError(Exception):
    """What the file server refused (its status, code and detail), or why it could not be
    reached (503 files_unavailable)."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


class UploadTooLarge(FilesError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, "upload_too_large", f"An upload is at most {limit} bytes.")


class LengthRequired(FilesError):
    def __init__(self) -> None:
        super().__init__(411, "length_required",
                         "An upload must say its length (Content-Length).")


def unavailable(detail: str) -> FilesError:
    return FilesError(503, "files_unavailable", detail)


def upload_length(content_length: str | None) -> int:
    """The declared length of an upload, within the site's bound."""
    if content_length is None or not content_length.isascii() or not content_length.isdigit():
        raise LengthRequired
    length = int(content_length)
    if length > settings.PORTAL_FILES_MAX_UPLOAD_BYTES:
        raise UploadTooLarge(settings.PORTAL_FILES_MAX_UPLOAD_BYTES)
    return length


@dataclasses.dataclass(frozen=True)
class UploadBody:
    """An upload's body: its declared length, read through `read`, or moved on from `socket`
    where the web server hands it over."""

    length: int
    read: Callable[[int], bytes]
    socket: BodySocket | None = None


def upload_body(request: HttpRequest) -> UploadBody:
    """The request's body as an upload: its length declared and bounded (LengthRequired,
    UploadTooLarge), its socket where the web server hands it over."""
    return UploadBody(length=upload_length(request.META.get("CONTENT_LENGTH")),
                      read=request.read, socket=body_socket(request.META))


def body_pieces(read: Callable[[int], bytes], length: int) -> Iterator[bytes]:
    """`length` bytes of a request body, UPLOAD_PIECE at a time, as `read` gives them; a body
    that ends early ends the upload (the server then sees less than announced and refuses
    it)."""
    left = length
    while left > 0:
        piece = read(min(UPLOAD_PIECE, left))
        if not piece:
            raise FilesError(400, "upload_incomplete",
                             f"The upload ended {left} bytes before its announced length.")
        left -= len(piece)
        yield piece


def send(server: FileServer, method: str, endpoint: str, claim: str, params: Mapping[str, str],
         *, body: Iterator[bytes] | None = None, length: int | None = None,
         headers: Mapping[str, str] | None = None) -> urllib3.BaseHTTPResponse:
    """One request to the file server (`endpoint` of the claim's volume); the response unread,
    to be streamed. A refusal (4xx) raises FilesError with the server's code; a server that
    does not answer or fails raises files_unavailable."""
    all_headers = {"Authorization": f"Bearer {server.token}", **(headers or {})}
    if length is not None:
        all_headers["Content-Length"] = str(length)
    url = f"{server.url}/v1/volumes/{claim}/{endpoint}?{urlencode(dict(params))}"
    try:
        # chunked=False: the length is declared, the pieces go out as they are
        response = _pool.urlopen(method, url, body=body, headers=all_headers,
                                 preload_content=False, decode_content=False, redirect=False,
                                 chunked=False)
    except urllib3.exceptions.HTTPError as exc:
        file_server_forget(server.namespace)
        log.warning("the file server of %s did not answer: %s", server.namespace, exc)
        raise unavailable("The file server did not answer; try again in a moment.") from exc
    return _answered(server, response)


def _answered(server: FileServer, response: urllib3.BaseHTTPResponse) -> urllib3.BaseHTTPResponse:
    if response.status >= 400:
        error = _refusal(response)
        response.release_conn()
        # its token refused (the Secret out of step) or its own failure: nothing the caller did
        if error.status in (401, 500):
            log.error("the file server of %s answered %d %s: %s", server.namespace,
                      error.status, error.code, error.detail)
            raise unavailable("The file server failed; try again in a moment.")
        raise error
    return response


def upload(server: FileServer, claim: str, params: Mapping[str, str],
           body: UploadBody) -> Any:
    """PUT the body to the claim's `content`; the server's answer (the file as listed)."""
    headers = {"Content-Type": "application/octet-stream"}
    if body.socket is not None and urlsplit(server.url).scheme == "http":
        buffered = body.socket.take_buffered()
        if buffered is not None:
            return _spliced(server, claim, params, body, buffered, headers)
    return read_json(send(server, "PUT", "content", claim, params,
                          body=body_pieces(body.read, body.length), length=body.length,
                          headers=headers))


def _spliced(server: FileServer, claim: str, params: Mapping[str, str], body: UploadBody,
             buffered: bytes, headers: Mapping[str, str]) -> Any:
    """The upload on a connection of its own: the request's head and what the web server
    had read of the body sent, the rest spliced from the client's socket (core/body_socket.py),
    then the answer read as send() reads it."""
    assert body.socket is not None
    address = urlsplit(server.url)
    connection = HTTPConnection(address.hostname or "", address.port or 80,
                                timeout=TIMEOUT.connect_timeout)
    try:
        try:
            connection.request("PUT", f"/v1/volumes/{claim}/content?{urlencode(dict(params))}",
                               headers={"Authorization": f"Bearer {server.token}",
                                        "Content-Length": str(body.length), **headers},
                               preload_content=False, decode_content=False)
            connection.sock.sendall(buffered)
            splice_body(body.socket, connection.sock, body.length - len(buffered),
                        timeout=float(TIMEOUT.read_timeout or 600))
        except (TargetFailed, BrokenPipeError, ConnectionResetError):
            pass  # the server answered before it took the whole body: its answer says why
        except SpliceError as exc:
            raise FilesError(400, "upload_incomplete", f"The upload ended early: {exc}.") from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            file_server_forget(server.namespace)
            log.warning("the file server of %s did not take an upload: %s", server.namespace, exc)
            raise unavailable("The file server did not answer; try again in a moment.") from exc
        connection.timeout = TIMEOUT.read_timeout
        try:
            response = connection.getresponse()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            file_server_forget(server.namespace)
            raise unavailable("The file server did not answer; try again in a moment.") from exc
        return read_json(_answered(server, response))
    finally:
        connection.close()


def _refusal(response: urllib3.BaseHTTPResponse) -> FilesError:
    raw = response.read(64 * 1024)
    try:
        body = json.loads(raw)
        return FilesError(response.status, str(body["code"]), str(body["detail"]))
    except (ValueError, KeyError, TypeError):
        return FilesError(response.status, "files_error", f"The file server answered "
                                                          f"{response.status}.")


def read_json(response: urllib3.BaseHTTPResponse) -> Any:
    try:
        return json.loads(response.read())
    finally:
        response.release_conn()


def stream(server: FileServer, response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """A download's body as the server sends it; its use recorded again at the end."""
    try:
        yield from response.stream(CHUNK, decode_content=False)
    finally:
        response.release_conn()
        file_server_used(server.namespace)


def download_headers(response: urllib3.BaseHTTPResponse) -> dict[str, str]:
    return {name: value for name in DOWNLOAD_HEADERS
            if (value := response.headers.get(name)) is not None}
