"""oauth2-proxy as a local process: the sidecar of a service workload, run on loopback.

The binary is the one stack/k8s/build.py builds (component "oauth2-proxy"); the configuration is
access/proxy.py's, from the same ProxySpec a pod gets. Only where it listens differs: a
free port on 127.0.0.1. The Secret's values are given directly (`secrets`, by key of the
workload's Secret, and tls.crt / tls.key where the spec has a TLS Secret); the files go into
`workdir`, laid out as in the pod, and the proxy runs there.
"""

from __future__ import annotations

import dataclasses
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from access.proxy import (
    PING_PATH,
    PROXY_FILE_PATHS,
    TLS_DIR,
    TLS_FILES,
    ProxySpec,
    proxy_command,
    proxy_files,
)

from .k8s import build
from .procs import StackError, free_port, stop, wait_for

START_TIMEOUT = 30.0


class AuthProxy:
    """One proxy: start() picks the port, writes the files, runs it and waits for its ping;
    `url` is where it answers, `log_file` what it said (stdout and stderr)."""

    def __init__(self, spec: ProxySpec, *, secrets: dict[str, str], workdir: Path,
                 binary: Path | None = None) -> None:
        self.spec = spec
        self.secrets = dict(secrets)
        self.workdir = Path(workdir)
        self.binary = binary
        self.log_file = self.workdir / "oauth2-proxy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.spec.tls_secret else "http"
        return f"{scheme}://127.0.0.1:{self.spec.listen_port}"

    def start(self) -> AuthProxy:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.spec = dataclasses.replace(self.spec, listen_host="127.0.0.1",
                                        listen_port=free_port())
        self._write_files()
        binary = self.binary or build.ensure("oauth2-proxy", quiet=True)["oauth2-proxy"]
        argv, proxy_env = proxy_command(self.spec, binary=str(binary), secrets=self.secrets)
        # nothing of a developer's own oauth2-proxy settings (OAUTH2_PROXY_*) leaks in
        env = {k: v for k, v in os.environ.items() if not k.startswith("OAUTH2_PROXY_")}
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(argv, env={**env, **proxy_env}, cwd=self.workdir,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        try:
            wait_for(self.answers, timeout=START_TIMEOUT, interval=0.05, proc=self.proc,
                     what=f"oauth2-proxy on {self.url} (log: {self.log_file})")
        except StackError as exc:
            self.stop()
            raise StackError(f"{exc}\n{self.log_tail()}") from exc
        return self

    def _write_files(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for key, text in proxy_files(self.spec).items():
            path = self.workdir / PROXY_FILE_PATHS[key]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if self.spec.tls_secret:
            (self.workdir / TLS_DIR).mkdir(parents=True, exist_ok=True)
            for name in TLS_FILES:
                path = self.workdir / TLS_DIR / name
                path.write_text(self.secrets[name])
                path.chmod(0o600)

    def answers(self) -> bool:
        """Whether it answers its ping (over TLS without checking the certificate: this asks
        whether it serves, not whom)."""
        context = ssl._create_unverified_context() if self.spec.tls_secret else None
        try:
            with urllib.request.urlopen(self.url + PING_PATH, timeout=1, context=context) as resp:
                status: int = resp.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
