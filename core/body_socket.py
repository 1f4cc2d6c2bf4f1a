"""A request body handed over on the client's socket, and moved on to another socket in the
kernel (splice(2)), never copied through the interpreter.

Relaying a large upload with read() and sendall() costs two copies of every byte in this
process and, read and send taking turns on one thread, leaves the client and the receiving
server each waiting on the other half the time: bench/results/files.md measured a 1 GiB
upload relayed so at a quarter of the speed of the same copy straight to the server. Moved
with splice, socket to pipe to socket, the bytes never come up to the interpreter and the
relay keeps pace with the copy.

The web server decides whether a request's body can be handed over (plain HTTP/1.x with a
declared length, nothing of it read yet): where it can, the request's WSGI environ holds a
BodySocket under ENVIRON_KEY (portal/webserver.py for gunicorn, the portal's server);
anywhere else (Django's own server, the test client, TLS at the worker) there is none and
the body is read as usual.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
from collections.abc import Mapping
from typing import Any, Protocol

ENVIRON_KEY = "portal.body_socket"
# the pipe between the two sockets: the most one splice moves (Linux's default ceiling for an
# unprivileged pipe, /proc/sys/fs/pipe-max-size)
PIPE_BYTES = 1 << 20


class BodySocket(Protocol):
    """The body of one request, of declared length, on the client's socket."""

    socket: socket.socket

    def take_buffered(self) -> bytes | None:
        """The part of the body the server has already read off the socket (the rest is on
        it), the body then the caller's; None when the application has read some of it
        already (it must then be read as usual)."""

    def taken(self, count: int) -> None:
        """`count` more bytes of the body were taken off the socket. What is never taken the
        server reads and drops, as it does the body of any request not read whole."""


class SpliceError(Exception):
    """The body could not be moved on whole."""


class SourceEnded(SpliceError):
    """The client's socket ended before the body's length."""


class TargetFailed(SpliceError):
    """The receiving socket was closed or reset (the server there answered early)."""


def body_socket(environ: Mapping[str, Any]) -> BodySocket | None:
    """The request's body on its socket, where the web server hands it over and this system
    splices (Linux)."""
    if not hasattr(os, "splice"):
        return None
    found: BodySocket | None = environ.get(ENVIRON_KEY)
    return found


def _wait(sock: socket.socket, event: int, timeout: float) -> None:
    poller = select.poll()
    poller.register(sock.fileno(), event)
    if not poller.poll(timeout * 1000):
        raise TimeoutError(f"no progress in {timeout:.0f} s")


def splice_body(body: BodySocket, target: socket.socket, count: int, *, timeout: float) -> None:
    """Move `count` bytes from the body's socket to `target` through a pipe, in the kernel,
    telling `body` what was taken. Raises SourceEnded (also when no byte comes for `timeout`
    seconds), TargetFailed, or TimeoutError when the target takes none for that long."""
    source = body.socket
    read_end, write_end = os.pipe()
    try:
        try:
            capacity = fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # a lower ceiling here: the pipe's own size
            capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
        left = count
        while left:
            try:
                _wait(source, select.POLLIN, timeout)
            except TimeoutError as exc:  # the client's, not the receiver's
                raise SourceEnded(f"no byte of the body came for {timeout:.0f} s") from exc
            try:
                # at most what the empty pipe holds: this never waits on the pipe
                got = os.splice(source.fileno(), write_end, min(left, capacity),
                                flags=os.SPLICE_F_MOVE)
            except BlockingIOError:
                continue
            if got == 0:
                raise SourceEnded(f"the body ended {left} bytes before its length")
            body.taken(got)
            left -= got
            while got:
                _wait(target, select.POLLOUT, timeout)
                try:
                    got -= os.splice(read_end, target.fileno(), got, flags=os.SPLICE_F_MOVE)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError) as exc:
                    raise TargetFailed(str(exc)) from exc
    finally:
        os.close(read_end)
        os.close(write_end)
