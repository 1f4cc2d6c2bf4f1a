"""A WSGI application that does with a request's body what the file API does with an upload's:
takes it off the client's socket where the web server hands it over (core/body_socket.py) and
splices it on to a TCP server on loopback, for tests/portal/test_body_socket.py to run under
the portal's gunicorn worker.

    PUT /splice?port=P[&read_first=N][&timeout=S]
        the body spliced to 127.0.0.1:P, which answers a line once the body is in (or closes
        early); read_first: N bytes read through wsgi.input first; timeout: how long the
        splice waits for a byte (30 s)
Answers 200 with one line: `spliced <what the receiver said>`, `not handed over` (no body
socket, or some of the body read already), `receiver closed`, or `ended early`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs

from core.body_socket import SourceEnded, TargetFailed, body_socket, splice_body


def _outcome(environ: dict[str, Any]) -> bytes:
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    length = int(environ["CONTENT_LENGTH"])
    if (first := int(query.get("read_first", "0"))) > 0:
        environ["wsgi.input"].read(first)
    body = body_socket(environ)
    buffered = body.take_buffered() if body is not None else None
    if body is None or buffered is None:
        return b"not handed over"
    with socket.create_connection(("127.0.0.1", int(query["port"])), timeout=10) as receiver:
        try:
            receiver.sendall(buffered)
            splice_body(body, receiver, length - len(buffered),
                        timeout=float(query.get("timeout", "30")))
        except TargetFailed:
            return b"receiver closed"
        except SourceEnded:
            return b"ended early"
        try:
            receiver.shutdown(socket.SHUT_WR)
            said = receiver.makefile("rb").readline().strip()
        except OSError:  # it took all there was room for (the kernel's buffers), then closed
            return b"receiver closed"
        return b"spliced " + said


def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    answer = _outcome(environ) + b"\n"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(answer)))])
    return [answer]
