"""Watch streams: one chunked HTTP response per watcher, fed from the store's shared history.

Every watcher keeps its own cursor (a resourceVersion) into the one bounded history and
waits on the store's change signal; each event is encoded once and the bytes are shared by
all watchers that select it. A slow watcher only delays itself: if it falls so far behind
that its events leave the history it gets the 410 ERROR event and its stream ends, like a
real watch cache.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubesim import tables
from kubesim.errors import ApiError
from kubesim.resources import ResourceType
from kubesim.selectors import Matcher
from kubesim.store import Store, WatchEvent, encode

DEFAULT_TIMEOUT = 1800.0  # the real server picks 30–60 minutes when none is asked for


@dataclass
class WatchRequest:
    rt: ResourceType
    namespace: str | None
    match: Matcher | None
    resource_version: str | None
    timeout: float
    bookmarks: bool
    send_initial_events: bool
    as_table: bool
    include_object: str


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + encode(obj) + b"}\n"


class Watcher:
    def __init__(self, store: Store, request: WatchRequest, bookmark_interval: float) -> None:
        self.store = store
        self.req = request
        self.bookmark_interval = bookmark_interval
        self.table_headers_sent = False

    # -- selection -------------------------------------------------------------------------

    def _in_scope(self, ev: WatchEvent) -> bool:
        if ev.rt is not self.req.rt:
            return False
        return self.req.namespace is None or ev.namespace == self.req.namespace

    def _translate(self, ev: WatchEvent) -> str | None:
        """The event type this watcher sees: selector changes turn MODIFIED into ADDED or
        DELETED, as the real watch cache does."""
        match = self.req.match
        if match is None:
            return ev.type
        now = match(ev.obj)
        before = ev.prev is not None and match(ev.prev)
        if ev.type == "ADDED":
            return "ADDED" if now else None
        if ev.type == "DELETED":
            return "DELETED" if (now or before) else None
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None

    @staticmethod
    def _shown(ev: WatchEvent, event_type: str) -> dict[str, Any]:
        """The object an event carries. An object that left the selector is sent as it was
        (the state that matched) with the event's resourceVersion, as the watch cache does."""
        if ev.type == "MODIFIED" and event_type == "DELETED" and ev.prev is not None:
            return {**ev.prev, "metadata": {**ev.prev["metadata"],
                                            "resourceVersion": str(ev.rv)}}
        return ev.obj

    def _encode(self, event_type: str, obj: dict[str, Any], shared: WatchEvent | None) -> bytes:
        if self.req.as_table:
            table = tables.table(
                self.req.rt.kind,
                [obj],
                resource_version=obj["metadata"].get("resourceVersion"),
                include_object=self.req.include_object,
                headers=not self.table_headers_sent,
            )
            self.table_headers_sent = True
            return _line(event_type, table)
        if shared is not None and event_type == shared.type:
            return shared.line()
        return _line(event_type, obj)

    def _bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.req.rt.kind, "apiVersion": self.req.rt.api_version, "metadata": meta}
        return _line("BOOKMARK", obj)

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """When the next BOOKMARK goes out, as the real watch cache schedules it: every
        `bookmark_interval`, and 2 s before the watch's timeout so that a client that
        reconnects resumes from a recent resourceVersion; None once that moment has passed."""
        when = min(now + self.bookmark_interval, deadline - 2.0)
        return when if when > now else None

    # -- streaming -------------------------------------------------------------------------

    async def serve(self, http_request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200)
        resp.content_type = "application/json"
        resp.enable_chunked_encoding()
        await resp.prepare(http_request)
        stopping: asyncio.Event = http_request.app["stopping"]
        deadline = time.monotonic() + self.req.timeout
        try:
            cursor, initial = self._initial()
        except ApiError as e:
            await self._write(resp, _line("ERROR", e.status()))
            return resp
        if initial:
            await self._write(resp, b"".join(initial))
        next_bookmark = self._next_bookmark(time.monotonic(), deadline)
        try:
            while not stopping.is_set():
                try:
                    events = self.store.events_since(cursor)
                except ApiError as e:  # fell out of the history: 410 Gone, then the end
                    await self._write(resp, _line("ERROR", e.status()))
                    break
                if events:
                    chunk = []
                    for ev in events:
                        if self._in_scope(ev):
                            event_type = self._translate(ev)
                            if event_type is not None:
                                chunk.append(self._encode(event_type, self._shown(ev, event_type),
                                                          ev))
                    cursor = events[-1].rv
                    if chunk:
                        await self._write(resp, b"".join(chunk))
                    continue
                now = time.monotonic()
                if now >= deadline:
                    break
                if self.req.bookmarks and next_bookmark is not None and now >= next_bookmark:
                    await self._write(resp, self._bookmark(cursor))
                    next_bookmark = self._next_bookmark(now, deadline)
                wait = deadline - now
                if self.req.bookmarks and next_bookmark is not None:
                    wait = min(wait, max(0.0, next_bookmark - now))
                signal = self.store.change_signal()
                try:
                    async with asyncio.timeout(wait):
                        await signal.wait()
                except TimeoutError:
                    pass
        except (ConnectionResetError, ConnectionError):
            return resp
        try:
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    async def _write(self, resp: web.StreamResponse, data: bytes) -> None:
        await resp.write(data)

    def _initial(self) -> tuple[int, list[bytes]]:
        """Where the stream starts and what it sends first."""
        rv_text = self.req.resource_version
        if self.req.send_initial_events or rv_text is None or rv_text in ("", "0"):
            page = self.store.select(self.req.rt, self.req.namespace, self.req.match)
            lines = [
                self._encode(
                    "ADDED",
                    dict(obj, kind=self.req.rt.kind, apiVersion=self.req.rt.api_version),
                    None,
                )
                for obj in page.items
            ]
            if self.req.send_initial_events:
                lines.append(self._bookmark(page.resource_version, initial_end=True))
            return page.resource_version, lines
        rv = int(rv_text)
        self.store.events_since(rv)  # raises 410 if too old
        return rv, []


def status_line(error: ApiError) -> bytes:
    return (json.dumps({"type": "ERROR", "object": error.status()}) + "\n").encode()
