"""Saving and loading the store to a JSON file (`--state-file`).

Writes are atomic (temporary file + rename) so a crash mid-save never leaves a torn file.
A periodic task saves every `save_interval` seconds when something changed, so a SIGKILL
loses at most that much; a clean shutdown saves once more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

from kubesim.store import Store

log = logging.getLogger("kubesim.persist")


def save(store: Store, path: str) -> None:
    _write_text(path, json.dumps(store.dump_state(), separators=(",", ":")))


def load(store: Store, path: str) -> bool:
    """Load a saved state if the file exists; returns whether it did."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        return False
    store.load_state(state)
    log.info(
        "loaded %d objects at resourceVersion %s from %s",
        len(state.get("objects", [])),
        store.resource_version,
        path,
    )
    return True


async def save_periodically(store: Store, path: str, interval: float) -> None:
    saved_rv = store.resource_version
    while True:
        await asyncio.sleep(interval)
        if store.resource_version != saved_rv:
            saved_rv = store.resource_version
            try:
                # Serialising is quick next to the file write; do the write off the loop.
                state = json.dumps(store.dump_state(), separators=(",", ":"))
                await asyncio.to_thread(_write_text, path, state)
            except Exception:
                log.exception("periodic save to %s failed", path)


def _write_text(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
