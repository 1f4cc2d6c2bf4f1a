"""The pieces of an SSH test against the real gpu-portal-sshd and the real OpenSSH client.

A CA and user keys (ed25519, `cryptography`), user certificates made as the portal makes them
(SSHCertificateBuilder: principal, the `workload@gpu-portal` critical option, extensions,
validity), a config folder (ca.pub, host_key, report_token), the server run locally as a pod runs
it (`gpu-portal-sshd run … -- PROGRAM`), a scripted portal that records every session report and
answers as the test says, and the ssh/scp/sftp command lines whose ProxyCommand is gpuctl's relay.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import ssh as sshkeys

from stack.procs import free_port
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = "42"
REPORT_TOKEN = "report-token-5c0ffee-not-for-logs"
WS_PATH = "/.gpu-portal/ssh"
# one key=value of log/slog's text form: a value is bare, or quoted as Go quotes strings
LOGFMT_FIELD = re.compile(r'([A-Za-z_][\w.]*)=("(?:[^"\\]|\\.)*"|\S*)')


def openssh_public(key: ed25519.Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def openssh_private(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())


@dataclass
class UserKey:
    """A user's key pair on disk (private key file, mode 0600) and, once issued, its certificate
    beside it (<key>-cert.pub), where ssh's CertificateFile reads it."""
    path: Path
    key: ed25519.Ed25519PrivateKey = field(default_factory=ed25519.Ed25519PrivateKey.generate)

    def __post_init__(self) -> None:
        self.path.write_bytes(openssh_private(self.key))
        self.path.chmod(0o600)

    @property
    def cert_path(self) -> Path:
        return self.path.with_name(self.path.name + "-cert.pub")

    def certify(self, ca: ed25519.Ed25519PrivateKey, *, principal: str = "alice",
                workload: str = WORKLOAD, serial: int = 12345678901, key_id: str = "alice@gpu-portal",
                valid_from: float | None = None, valid_until: float | None = None,
                extensions: tuple[str, ...] = ("permit-pty", "permit-port-forwarding")) -> str:
        """Issue a user certificate as the portal does; the certificate line."""
        now = time.time()
        builder = (sshkeys.SSHCertificateBuilder()
                   .public_key(self.key.public_key())
                   .type(sshkeys.SSHCertificateType.USER)
                   .serial(serial)
                   .key_id(key_id.encode())
                   .valid_principals([principal.encode()])
                   .valid_after(int(valid_from if valid_from is not None else now - 60))
                   .valid_before(int(valid_until if valid_until is not None else now + 600))
                   .add_critical_option(b"workload@gpu-portal", workload.encode()))
        for extension in extensions:
            builder = builder.add_extension(extension.encode(), b"")
        line = builder.sign(ca).public_bytes().decode()
        self.cert_path.write_text(line + "\n")
        return line


class ScriptedPortal:
    """The portal's /api/v1/ssh-sessions/ as a test scripts it: every report is recorded (body
    and Authorization header); `answers[event]` gives (status, body) for a report."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.answers: dict[str, Callable[[dict], tuple[int, dict]]] = {
            "start": lambda body: (200, {"allowed": True}),
            "check": lambda body: (200, {"end": {}}),
            "end": lambda body: (200, {}),
        }
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = (404, {})
                if self.path == "/api/v1/ssh-sessions/":
                    portal.reports.append(body)
                    portal.authorizations.append(self.headers.get("Authorization", ""))
                    status, answer = portal.answers[body["event"]](body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def of(self, event: str) -> list[dict]:
        return [r for r in self.reports if r["event"] == event]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Sshd:
    """`gpu-portal-sshd run` as a pod runs it, with its stderr in a file (its log)."""

    def __init__(self, binary: Path, workdir: Path, *, ca_public: str, host_key: bytes,
                 portal_url: str | None, program: list[str] | None = None,
                 env: dict[str, str] | None = None, check_interval: str = "30s",
                 extra: list[str] | None = None) -> None:
        self.port = free_port()
        self.config = workdir / "sshd-config"
        self.config.mkdir(exist_ok=True)
        (self.config / "ca.pub").write_text(ca_public + "\n")
        (self.config / "host_key").write_bytes(host_key)
        (self.config / "host_key").chmod(0o600)
        (self.config / "report_token").write_text(REPORT_TOKEN + "\n")
        self.log_path = workdir / "sshd.log"
        self.url = f"ws://127.0.0.1:{self.port}{WS_PATH}"
        command = [str(binary), "run", "--listen", f"127.0.0.1:{self.port}",
                   "--config-dir", str(self.config), "--workload", WORKLOAD,
                   "--check-interval", check_interval, *(extra or [])]
        if portal_url is not None:
            command += ["--portal", portal_url]
        if program:
            command += ["--", *program]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=log, env=env)

    def wait_serving(self) -> Sshd:
        def serving() -> bool:
            assert self.proc.poll() is None, f"sshd exited: {self.log()}"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2)
            except urllib.error.HTTPError as exc:
                return exc.code == 404
            except OSError:
                return False
            return False
        eventually(serving, message=lambda: f"sshd not serving; log: {self.log()}")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def records(self) -> list[dict[str, str]]:
        """The server's own log lines (logger=gpu-portal-sshd), each as its fields."""
        records = []
        for line in self.log().splitlines():
            fields = {name: ast.literal_eval(value) if value.startswith('"') else value
                      for name, value in LOGFMT_FIELD.findall(line)}
            if fields.get("logger") == "gpu-portal-sshd":
                records.append(fields)
        return records

    def logged(self, msg: str, **contains: str) -> list[dict[str, str]]:
        """The records with this message whose named fields contain the texts given."""
        return [r for r in self.records() if r.get("msg") == msg
                and all(text in r.get(name, "") for name, text in contains.items())]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode


@dataclass
class Client:
    """The OpenSSH client's options for one server: the relay as ProxyCommand, a known_hosts
    file holding the server's host key (checked strictly), one identity and its certificate."""
    sshd: Sshd
    workdir: Path
    host_public: str
    relay_headers: dict[str, str] = field(default_factory=dict)

    def options(self, key: UserKey, *, user: str = "alice", certificate: bool = True) -> list[str]:
        known_hosts = self.workdir / "known_hosts"
        known_hosts.write_text(f"workload {self.host_public}\n")
        relay = self.workdir / "relay.py"
        relay.write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from gpuctl.ssh_transport import relay\n"
            f"sys.exit(relay({self.sshd.url!r}, headers={self.relay_headers!r}))\n")
        options = {
            "ProxyCommand": f"{shlex.quote(sys.executable)} {shlex.quote(str(relay))}",
            "UserKnownHostsFile": str(known_hosts), "GlobalKnownHostsFile": "/dev/null",
            "StrictHostKeyChecking": "yes", "HostKeyAlias": "workload",
            "IdentitiesOnly": "yes", "IdentityFile": str(key.path), "IdentityAgent": "none",
            "BatchMode": "yes", "PasswordAuthentication": "no",
            "KbdInteractiveAuthentication": "no", "User": user, "ConnectTimeout": "20",
        }
        if certificate:
            options["CertificateFile"] = str(key.cert_path)
        flat = ["-F", "/dev/null"]
        for name, value in options.items():
            flat += ["-o", f"{name}={value}"]
        return flat

    @staticmethod
    def env() -> dict[str, str]:
        return {**os.environ, "TERM": "xterm-256color"}

    def ssh(self, key: UserKey, *args: str, user: str = "alice", certificate: bool = True,
            input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", *self.options(key, user=user, certificate=certificate),
                               "workload", *args], input=input, capture_output=True,
                              timeout=timeout, env=self.env())

    def popen(self, key: UserKey, *args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(["ssh", *self.options(key), "workload", *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env(), **kwargs)


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
