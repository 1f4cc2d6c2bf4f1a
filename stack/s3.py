"""An S3 server on loopback over a temporary folder: versitygw (github.com/versity/versitygw,
Apache-2.0), built from the Go module proxy by stack/k8s/build.py (its wrapper module is
stack/versitygw), for the tests of `s3` secrets (tests/support/s3.py) as a site's object store
would answer them.

Its one identity is the root key pair it is started with, passed in its environment (never on
its command line, where any process's listing would show it). The posix backend keeps each
bucket as a folder of `data/` and the objects' metadata in a sidecar folder (`meta/`), so the
file system needs no extended attributes.

    python -m stack.s3 /tmp/s3      # runs until Ctrl-C, prints the endpoint and the key pair
"""

from __future__ import annotations

import dataclasses
import secrets
import string
import subprocess
import sys
from pathlib import Path

from .procs import free_port, http_ok, serve_until_signalled, spawn_ready, stop

HEALTH_PATH = "/health"
REGION = "us-east-1"


def key_pair() -> tuple[str, str]:
    """A fresh access key id and secret, shaped as AWS's (20 upper-case characters, 40)."""
    alphabet = string.ascii_uppercase + string.digits
    return ("".join(secrets.choice(alphabet) for _ in range(20)),
            secrets.token_urlsafe(30)[:40])


@dataclasses.dataclass
class S3Server:
    """One server in `workdir` (data/, meta/, s3.log) on a free loopback port."""

    workdir: Path
    port: int = 0
    access_key: str = ""
    secret_key: str = ""
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.port = self.port or free_port()
        if not (self.access_key and self.secret_key):
            self.access_key, self.secret_key = key_pair()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def region(self) -> str:
        return REGION

    def command(self, binary: Path) -> list[str]:
        return [str(binary), "--port", f"127.0.0.1:{self.port}", "--region", REGION,
                "--health", HEALTH_PATH, "--quiet",
                "posix", "--sidecar", str(self.workdir / "meta"), str(self.workdir / "data")]

    def start(self) -> S3Server:
        from .k8s import build

        binary = build.ensure("versitygw")["versitygw"]
        for folder in ("data", "meta"):
            (self.workdir / folder).mkdir(parents=True, exist_ok=True)
        log_path = self.workdir / "s3.log"
        env = {"ROOT_ACCESS_KEY": self.access_key, "ROOT_SECRET_KEY": self.secret_key,
               "PATH": "/usr/bin:/bin"}
        self.proc = spawn_ready(self.command(binary), log_path, env=env,
                                ready=lambda: http_ok(f"{self.endpoint}{HEALTH_PATH}"),
                                what="the S3 server (versitygw)")
        return self

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m stack.s3 FOLDER", file=sys.stderr)
        return 2
    return serve_until_signalled(
        "s3", S3Server(Path(argv[0])).start,
        lambda server: f"S3 at {server.endpoint} (region {REGION})\n"
                       f"  AWS_ACCESS_KEY_ID={server.access_key}\n"
                       f"  AWS_SECRET_ACCESS_KEY={server.secret_key}",
        S3Server.stop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
