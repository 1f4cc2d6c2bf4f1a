"""Small Go modules and a `go` that notes each of its runs, for the tests of stack/k8s/build.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from stack.k8s.build import Component


def module(folder: Path, mains: dict[str, str]) -> Path:
    """A Go module `example.local/m` in `folder`, a main package (printing its name) at each
    relative path of `mains` ("." the module's root), the standard library only; `mains`'
    values are the Go source of each, or "" for a main that prints its name."""
    folder.mkdir(parents=True)
    (folder / "go.mod").write_text("module example.local/m\n\ngo 1.26\n")
    for path, source in mains.items():
        (folder / path).mkdir(parents=True, exist_ok=True)
        (folder / path / "main.go").write_text(source or (
            f'package main\n\nimport "fmt"\n\nfunc main() {{ fmt.Println("{path}") }}\n'))
    return folder


def component(folder: Path, binaries: dict[str, str], name: str = "m") -> Component:
    return Component(name=name, version="v1", module="example.local/m", binaries=binaries,
                     folder=folder)


def noting_go(folder: Path, gate: Path | None = None) -> Path:
    """A `go` in `folder` (put it first on PATH) that appends its arguments to folder/runs, one
    line a run, then, once `gate` exists (at once without one), runs the real go."""
    real = shutil.which("go")
    assert real, "the Go toolchain (go ≥ 1.26) is needed: https://go.dev/dl/"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "go"
    script.write_text(f"""#!{sys.executable}
import os, sys, time
from pathlib import Path
with open({str(folder / "runs")!r}, "a") as runs:
    runs.write(" ".join(sys.argv[1:]) + "\\n")
gate = {str(gate) if gate else None!r}
while gate and not Path(gate).exists():
    time.sleep(0.05)
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
""")
    script.chmod(0o755)
    return folder / "runs"
