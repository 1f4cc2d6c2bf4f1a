"""What a cold `python -m stack.k8s.build` compiles: each component's packages, and how many of
them (and how many MB of Go source) are new when the components build one after another into
one Go build cache, in stack/k8s/build.py's order.

A package compiles once per distinct identity, as Go's build cache keys it: its import path,
its module's version, the Go files the build's tags select, and its imports' identities (a
dependency at another version makes every package above it another compilation). The standard
library is left out. Reads `go list -deps` only; builds nothing.

    .venv/bin/python bench/build_share.py [--repo PATH]   # PATH: another checkout to count
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FIELDS = "ImportPath,Module,GoFiles,Imports,ImportMap,Standard,Dir"


def listed(package: str, cwd: Path, tags: str) -> list[dict[str, Any]]:
    cmd = ["go", "list", "-deps", f"-json={FIELDS}", *(["-tags", tags] if tags else []), package]
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
    decoder, at, found = json.JSONDecoder(), 0, []
    while (at := len(out) - len(out[at:].lstrip())) < len(out):
        item, at = decoder.raw_decode(out, at)
        found.append(item)
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo))
    from stack.k8s import build

    seen: set[str] = set()
    size: dict[str, int] = {}
    print("| component | packages | new | new Go source (MB) |\n| --- | ---: | ---: | ---: |")
    for name, component in build.COMPONENTS.items():
        source = getattr(component, "source", None)
        if getattr(component, "in_module", False):  # the older layout: built inside the module
            source = build.module_dir(name)
        assert source is not None
        ids: dict[str, str] = {}
        mine: set[str] = set()
        for package in component.binaries.values():
            for p in listed(package, source, component.tags):  # dependencies come first
                module = p.get("Module") or {}
                version = (module.get("Replace") or module).get("Version", "")
                imports = sorted(ids[p.get("ImportMap", {}).get(i, i)] for i in p.get("Imports", [])
                                 if p.get("ImportMap", {}).get(i, i) in ids)
                key = hashlib.sha256(repr((p["ImportPath"], module.get("Path"), version,
                                           p.get("GoFiles"), imports)).encode()).hexdigest()
                ids[p["ImportPath"]] = key
                if not p.get("Standard"):
                    mine.add(key)
                    size[key] = sum((Path(p["Dir"]) / f).stat().st_size
                                    for f in p.get("GoFiles") or ())
        new = mine - seen
        seen |= new
        print(f"| {name} | {len(mine)} | {len(new)} | {sum(size[k] for k in new) / 1e6:.0f} |")
    print(f"| **all** | | **{len(seen)}** | **{sum(size.values()) / 1e6:.0f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
