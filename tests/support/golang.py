"""The Go toolchain as the tests run it on our own Go modules (sshd/, filesd/, the provisioner's
wrapper): in the environment and with the compile flags stack/k8s/build.py builds them with, so
that `go test` reuses the packages the build compiled, and its binary, with no path of the
checkout in it, is the same from one fresh clone to the next (Go's test cache keeps its result)."""

from __future__ import annotations

import shutil
import subprocess

from stack.k8s import build

GO_ENV = build.go_env(build.COMPONENTS["portal-sshd"])


def go() -> str:
    path = shutil.which("go")
    assert path, "the Go toolchain (go ≥ 1.26) is needed: https://go.dev/dl/"
    return path


def go_test(name: str) -> subprocess.CompletedProcess[str]:
    """`go test ./...` in the folder of the component `name`, as it is built. The test waits
    for that build (a `builds` mark: tests/fixtures/builds.py) so that it compiles only its own
    packages."""
    component = build.COMPONENTS[name]
    return subprocess.run([go(), "test", *build.compile_flags(component), "./..."],
                          cwd=component.source, env=build.go_env(component),
                          capture_output=True, text=True, timeout=280)
