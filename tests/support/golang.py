"""The Go toolchain as the tests run it on our own Go modules (sshd/, filesd/): as
stack/k8s/build.py builds them, this toolchain, go.mod and go.sum as they are, cgo off."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

GO_ENV = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}


def go() -> str:
    path = shutil.which("go")
    assert path, "the Go toolchain (go ≥ 1.26) is needed: https://go.dev/dl/"
    return path


def go_test(module: Path) -> subprocess.CompletedProcess[str]:
    """`go test ./...` in the module's folder."""
    return subprocess.run([go(), "test", "./..."], cwd=module, env=GO_ENV, capture_output=True,
                          text=True, timeout=280)
