"""gpuctl's command line (filled in by the CLI commit)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    print("gpuctl: not implemented yet")
    return 2
