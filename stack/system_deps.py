"""Install the Debian packages the test suite runs for real (Redis, PostgreSQL, Chromium, the OpenSSH
client) and Keystone, and see that the Go components (the real Kubernetes control plane, its
addons, gpu-portal-sshd: stack/k8s/build.py) are building in the background, as `make test` starts
them; each test that runs one waits for it (tests/fixtures/builds.py).

Run by `make test` before pytest, so a fresh machine needs nothing but this repository.
"""

from __future__ import annotations

import shutil
import sys

from .browser import chromium_binary
from .k8s import build as k8s_build
from .keystone import KeystoneInstall
from .postgres import postgres_bindir
from .procs import REPO, StackError, apt_install
from .redis import redis_server_binary


def main() -> int:
    try:
        redis_server_binary(install=True)
        postgres_bindir(install=True)
        chromium_binary(install=True)  # the browser journeys (tests/browser)
        if not all(shutil.which(tool) for tool in ("ssh", "scp", "sftp")):
            apt_install("openssh-client")  # tests/sshd: the real ssh, scp and sftp
        # Keystone's own virtualenv, shared with the demo; bootstrapped per test run
        KeystoneInstall(venv=REPO / ".demo" / "keystone-venv", state_dir=REPO / ".demo" / "x",
                        port=0).ensure_venv()
        # the real control plane (tests/realcluster, tests/conformance) and the other Go
        # components: built once from the Go module proxy into ~/.cache/gpu-portal, reused by
        # every later run and clone; started here too when run without make
        k8s_build.start_background()
    except StackError as exc:
        print(f"make test: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
