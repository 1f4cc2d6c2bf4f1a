"""SSH into a running workload through the portal: the client's keys and certificates.

- One ed25519 key per machine, made the first time (`ensure_key`), never sent anywhere: the
  portal signs its public half into a short-lived certificate for one workload
  (`POST workloads/{id}/ssh-certificate/`), which is renewed whenever it has less than a minute
  left (`ensure_certificate`). Nothing to register, nothing to revoke.
- The workload's host key comes with the certificate and goes into a known_hosts file of
  gpuctl's own, under the workload's alias: the host is checked strictly, with no
  trust-on-first-use.
- The transport is `gpuctl ssh-proxy ID` as OpenSSH's ProxyCommand: a WebSocket to the
  workload's address at SSH_PATH, through its authenticating proxy, with a bearer token the
  portal issues for that workload (gpuctl/ssh_transport.py relays the bytes).

Files live in $GPUCTL_SSH_DIR, else $XDG_CONFIG_HOME/gpuctl/ssh (~/.config/gpuctl/ssh): the
paths the portal's own Host block names.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shlex
import shutil
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import ssh as ssh_format

SSH_PATH = "/.gpu-portal/ssh"  # where a workload's proxy routes SSH (the portal's contract)
PORTAL_KEY_DIR = "~/.config/gpuctl/ssh"  # the key directory the portal's Host block names
KEY_NAME = "id_ed25519"
RENEW_MARGIN = dt.timedelta(seconds=60)


def key_dir(env: Mapping[str, str] | None = None) -> Path:
    values: Mapping[str, str] = os.environ if env is None else env
    if values.get("GPUCTL_SSH_DIR"):
        return Path(values["GPUCTL_SSH_DIR"]).expanduser()
    base = Path(values.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "gpuctl" / "ssh"


def host_alias(workload_id: int) -> str:
    return f"gpu-portal-{workload_id}"


def certificate_path(directory: Path, workload_id: int) -> Path:
    return directory / f"workload-{workload_id}-cert.pub"


def portal_block_path(directory: Path, workload_id: int) -> Path:
    """The portal's Host block for the workload, kept with its certificate."""
    return directory / f"workload-{workload_id}.portal-config"


def ensure_key(directory: Path) -> Path:
    """The machine's private key (made once, mode 0600, in a directory only its owner reads)
    and its public half beside it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = directory / KEY_NAME
    if not private.exists():
        key = ed25519.Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH)
        (directory / f"{KEY_NAME}.pub").write_bytes(public + b" gpuctl\n")
    return private


def public_key_text(directory: Path) -> str:
    return (directory / f"{KEY_NAME}.pub").read_text().strip()


def certificate_valid_until(path: Path) -> dt.datetime | None:
    """When the certificate at `path` expires; None when there is none or it cannot be read."""
    try:
        cert = ssh_format.load_ssh_public_identity(path.read_bytes().strip())
    except (OSError, ValueError):
        return None
    if not isinstance(cert, ssh_format.SSHCertificate):
        return None
    return dt.datetime.fromtimestamp(cert.valid_before, dt.UTC)


def _replace_line(path: Path, prefix: str, line: str) -> None:
    """`line` in place of any line starting with `prefix` (a known_hosts entry per alias)."""
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [existing for existing in lines if not existing.startswith(prefix)]
    path.write_text("\n".join([*kept, line]) + "\n")


def ensure_certificate(api: Any, workload_id: int, directory: Path, *,
                       now: dt.datetime | None = None) -> dict[str, Any] | None:
    """A certificate for the workload with more than RENEW_MARGIN left: the one on disk, or a
    new one from the portal (written with the workload's known_hosts line). Returns the
    portal's answer when it asked, None when the one on disk still serves."""
    ensure_key(directory)
    path = certificate_path(directory, workload_id)
    until = certificate_valid_until(path)
    now = now or dt.datetime.now(dt.UTC)
    if until is not None and until - now > RENEW_MARGIN and \
            portal_block_path(directory, workload_id).exists():
        return None
    issued: dict[str, Any] = api.post(f"workloads/{workload_id}/ssh-certificate/",
                                      {"public_key": public_key_text(directory)})
    path.write_text(issued["certificate"].strip() + "\n")
    portal_block_path(directory, workload_id).write_text(issued["ssh_config"].rstrip() + "\n")
    known = issued["known_hosts"].strip()
    _replace_line(directory / "known_hosts", known.split()[0] + " ", known)
    return issued


def gpuctl_command(options: list[str]) -> str:
    """How OpenSSH runs gpuctl again as the ProxyCommand: `gpuctl` where that is this one on
    PATH, else this Python with `-m gpuctl`; with the options that chose the portal."""
    found = shutil.which("gpuctl")
    argv = ["gpuctl"] if found and Path(found).parent == Path(sys.executable).parent \
        else [sys.executable, "-m", "gpuctl"]
    return shlex.join([*argv, *options])


class BlockRefused(ValueError):
    """A Host block gpuctl will not write: the message says which value and why."""


# the portal's Host block, line by line: the options it may set, each once; any value but the
# ProxyCommand a plain word (what the portal's own writer allows, access/ssh.py)
PORTAL_OPTIONS = ("HostName", "User", "ProxyCommand", "IdentityFile", "CertificateFile",
                  "HostKeyAlias", "UserKnownHostsFile", "StrictHostKeyChecking",
                  "IdentitiesOnly", "ServerAliveInterval")
PATH_OPTIONS = ("IdentityFile", "CertificateFile", "UserKnownHostsFile")
_PORTAL_LINE = re.compile(r"    ([A-Za-z]+) ([A-Za-z0-9._/~][A-Za-z0-9._/~@:+-]*)")
# what makes OpenSSH's config reader split, unquote or cut a value
_NEEDS_QUOTES = re.compile(r"[\s\"'#=\\,]")


def portal_options(portal_block: str, workload_id: int) -> list[tuple[str, str]]:
    """The (option, value) lines of the portal's Host block for the workload, checked: BlockRefused
    for anything else (another host, an option or a value it never writes, a line break or
    a quote inside a value)."""
    lines = portal_block.rstrip("\n").split("\n")
    if not lines or lines[0] != f"Host {host_alias(workload_id)}":
        raise BlockRefused(f"the portal's Host block is not for {host_alias(workload_id)}")
    options: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line == f"    ProxyCommand gpuctl ssh-proxy {workload_id}":
            option, value = "ProxyCommand", f"gpuctl ssh-proxy {workload_id}"
        else:
            match = _PORTAL_LINE.fullmatch(line)
            if match is None or match[1] == "ProxyCommand":
                raise BlockRefused(f"the portal's Host block has a line gpuctl does not write: "
                                   f"{line!r}")
            option, value = match[1], match[2]
        if option not in PORTAL_OPTIONS or option in dict(options):
            raise BlockRefused(f"the portal's Host block sets {option!r}, which gpuctl does not "
                               "write")
        options.append((option, value))
    return options


def config_path(path: str) -> str:
    """A local path as OpenSSH's config reader gives it back exactly: `%` doubled (a path
    option expands %-tokens), quoted where it has a blank, quote, `#`, `=`, `,` or backslash
    (a backslash or double quote escaped inside). A control character (a line break) cannot
    be written: BlockRefused."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise BlockRefused(f"{path!r} has a control character; it cannot go into an SSH config")
    text = path.replace("%", "%%")
    if _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def config_command(command: str) -> str:
    """A ProxyCommand as OpenSSH runs it (the rest of the line, through the shell): `%` doubled
    (its %-tokens); a control character, a leading blank or `=`, or quotes that do not pair
    (OpenSSH refuses the whole file) cannot be written."""
    try:
        shlex.split(command)
    except ValueError:
        raise BlockRefused(f"{command!r} is not a shell command line") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in command) or command[:1] in ("", " ", "="):
        raise BlockRefused(f"{command!r} cannot be written as an SSH ProxyCommand")
    return command.replace("%", "%%")


def config_block(portal_block: str, *, workload_id: int, directory: Path, command: str) -> str:
    """The portal's Host block (checked: portal_options) with this machine's key directory
    and gpuctl command, each value written so that `ssh -G` reads back exactly it."""
    lines = [f"Host {host_alias(workload_id)}"]
    for option, value in portal_options(portal_block, workload_id):
        if option == "ProxyCommand":
            value = config_command(f"{command} ssh-proxy {workload_id}")
        elif option in PATH_OPTIONS:
            local = (str(directory) + value[len(PORTAL_KEY_DIR):]
                     if value.startswith(PORTAL_KEY_DIR + "/") else value)
            value = config_path(local)
        lines.append(f"    {option} {value}")
    return "\n".join(lines) + "\n"


def websocket_url(workload_url: str) -> str:
    """ws(s)://<the workload's address>SSH_PATH, from the URL the portal gives for it."""
    parts = urllib.parse.urlsplit(workload_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"the workload has no address yet ({workload_url or 'none'})")
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}{SSH_PATH}"
