"""Debian's Chromium for the browser tests (Playwright's own browser download does not work here)."""

from __future__ import annotations

import shutil

from .procs import StackError, apt_install


def chromium_binary(install: bool = True) -> str:
    """The path of a Chromium that Playwright can drive through `executable_path`."""
    found = shutil.which("chromium")
    if found is None and install:
        apt_install("chromium")
        found = shutil.which("chromium")
    if found is None:
        raise StackError("Chromium not found: `apt-get install chromium`")
    return found
