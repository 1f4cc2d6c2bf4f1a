"""SSH's transport to a workload: a WebSocket through the workload's authenticating proxy.

OpenSSH runs the relay as its ProxyCommand (`gpuctl ssh-proxy ID`): what ssh writes to our stdin
goes out as binary WebSocket messages, and every message that comes back is written to our
stdout at once, so the bytes are SSH's own, unbuffered, both ways. The server at the other end
is gpu-portal-sshd (sshd/), at the path /.gpu-portal/ssh behind the proxy.

    python -m gpuctl.ssh_transport ws://127.0.0.1:4182/.gpu-portal/ssh    (no headers: tests, a
                                                                          server on loopback)
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import BinaryIO

from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect

CHUNK = 64 * 1024


def relay(url: str, *, headers: dict[str, str], ssl_context: ssl.SSLContext | None = None,
          stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Copy stdin to the WebSocket at `url` and its messages to stdout until either side ends.

    0 on a clean end; otherwise one line on stderr (never the headers: they carry the token)
    and 1.
    """
    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    try:
        socket = connect(url, additional_headers=headers, ssl=ssl_context, max_size=None,
                         compression=None, open_timeout=30, user_agent_header="gpuctl-ssh")
    except Exception as exc:  # noqa: BLE001 - every way it fails is said in one line
        refusal = _refusal(exc)
        if refusal is not None:
            return _fail(f"the workload's proxy refused the connection: {refusal}")
        return _fail(f"cannot reach the workload's SSH server: {_plain(exc)}")

    def upstream() -> None:
        try:
            while chunk := _read(source):
                socket.send(chunk)
        except Exception:  # noqa: BLE001 - the downstream side reports how it ended
            pass
        finally:
            socket.close()  # ssh closed its end: so do we

    threading.Thread(target=upstream, daemon=True, name="ssh-relay-upstream").start()
    try:
        for message in socket:
            data = message.encode() if isinstance(message, str) else message
            sink.write(data)
            sink.flush()
    except ConnectionClosedOK:
        return 0
    except Exception as exc:  # noqa: BLE001 - any other end is an error, said in one line
        return _fail(f"the connection to the workload broke: {_plain(exc)}")
    finally:
        socket.close()
    return 0


def _read(source: BinaryIO) -> bytes:
    """Whatever is there, at most CHUNK bytes, without waiting for more (a pipe's file object
    would otherwise block until CHUNK bytes came)."""
    try:
        fd = source.fileno()
    except (AttributeError, OSError, ValueError):
        read1 = getattr(source, "read1", None)
        return read1(CHUNK) if read1 is not None else source.read(CHUNK)
    return os.read(fd, CHUNK)


def _refusal(exc: BaseException) -> str | None:
    """The HTTP status that refused the upgrade, where one did: also when websockets went on
    to follow a redirect (the proxy sends a refused token to the portal's login, which is no
    WebSocket) and failed there."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, InvalidStatus):
            status = seen.response.status_code
            if 300 <= status < 400:
                return f"{status} (it asked for a login: the token was not accepted)"
            return str(status)
        seen = seen.__cause__ or seen.__context__
    return None


def _plain(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _fail(message: str) -> int:
    print(f"gpuctl: {message}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m gpuctl.ssh_transport WS_URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(relay(sys.argv[1], headers={}))
