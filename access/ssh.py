"""The portal as an SSH certificate authority, as functions of keys and values.

- The CA key: PORTAL_SSH_CA_KEY (an OpenSSH or PEM ed25519 private key) or the file
  PORTAL_SSH_CA_KEY_FILE names; without either, an ed25519 key derived from SECRET_KEY (its seed
  an HMAC of SECRET_KEY), so the demo and the tests need nothing. A site that wants to rotate it
  apart from SECRET_KEY sets its own.
- A user certificate: one principal (`principal_for`: from the Keystone user id, never the
  name, which may be anything), bound to one workload by the
  critical option CRITICAL_OPTION (a server that does not know it refuses the certificate),
  `permit-pty` and `permit-port-forwarding`, valid minutes (PORTAL_SSH_CERTIFICATE_SECONDS).
- A workload's host key and the token its server reports sessions with are derived from
  SECRET_KEY and the workload's OAuth client id, like its proxy's secrets (services.py): a
  retried create writes the same Secret, the client learns the host key from the portal (no
  trust on first use), and nothing is stored.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import hmac
import re
import secrets
from functools import cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import ssh as ssh_format
from django.conf import settings

from .ssh_server import SSH_PATH, SSH_PORT  # noqa: F401 - the contract, in one place

CRITICAL_OPTION = "workload@gpu-portal"
EXTENSIONS = ("permit-port-forwarding", "permit-pty")
CLOCK_SKEW = dt.timedelta(seconds=60)
MIN_RSA_BITS = 2048
PORTAL_KEY_DIR = "~/.config/gpuctl/ssh"  # where gpuctl keeps its key (gpuctl/ssh.py)


class KeyRefused(ValueError):
    """The public key cannot be certified; the message says why (the API's 400)."""


def _derived_seed(purpose: str) -> bytes:
    return hmac.new(settings.SECRET_KEY.encode(), purpose.encode(), hashlib.sha256).digest()


def _openssh_public(key: ed25519.Ed25519PublicKey, comment: str) -> str:
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{line.decode()} {comment}"


@cache
def _ca_key(configured: str, secret_key: str) -> ed25519.Ed25519PrivateKey:
    if configured:
        data = configured.encode()
        key = (ssh_format.load_ssh_private_key(data, None) if b"OPENSSH" in data
               else serialization.load_pem_private_key(data, None))
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise ValueError("PORTAL_SSH_CA_KEY must be an ed25519 private key")
        return key
    return ed25519.Ed25519PrivateKey.from_private_bytes(_derived_seed("gpu-portal-ssh-ca"))


def ca_private_key() -> ed25519.Ed25519PrivateKey:
    configured = settings.PORTAL_SSH_CA_KEY
    if not configured and settings.PORTAL_SSH_CA_KEY_FILE:
        configured = Path(settings.PORTAL_SSH_CA_KEY_FILE).read_text()
    return _ca_key(configured, settings.SECRET_KEY)


def ca_public_key() -> str:
    """The CA's public key, as an authorized_keys line (what a workload's server trusts)."""
    return _openssh_public(ca_private_key().public_key(), "gpu-portal-ca")


def host_key_for(client_id: str) -> tuple[str, str]:
    """The workload's host key: (private key, PKCS#8 PEM; public key line). PKCS#8, not
    OpenSSH's own format, whose random check bytes would change the Secret at each create."""
    key = ed25519.Ed25519PrivateKey.from_private_bytes(_derived_seed(f"ssh-host:{client_id}"))
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return private, _openssh_public(key.public_key(), "gpu-portal-workload")


def report_token_for(client_id: str) -> str:
    """What the workload's server presents when it reports sessions: `<client id>.<mac>`."""
    mac = base64.urlsafe_b64encode(_derived_seed(f"ssh-report:{client_id}")).decode()
    return f"{client_id}.{mac.rstrip('=')}"


def report_token_client(token: str) -> str | None:
    """The client id a report token was made for, or None when it is not one of ours."""
    client_id, _, _ = token.rpartition(".")
    if not client_id or not hmac.compare_digest(report_token_for(client_id), token):
        return None
    return client_id


def report_base_url() -> str:
    """Where a pod reaches the portal's API: PORTAL_SSH_REPORT_URL, else the OIDC backend
    address the proxies use, without its /o."""
    configured: str = settings.PORTAL_SSH_REPORT_URL
    if configured:
        return configured.rstrip("/")
    backend: str = settings.PORTAL_OIDC_BACKEND_URL or settings.PORTAL_OIDC_ISSUER
    return backend.rstrip("/").removesuffix("/o")


def host_alias(workload_id: int) -> str:
    """The name the client's known_hosts file knows the workload's host key by."""
    return f"gpu-portal-workload-{workload_id}"


CertifiableKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey


def parse_public_key(text: str) -> CertifiableKey:
    """A user's public key, or KeyRefused: one OpenSSH public key line, not a certificate,
    ed25519, ECDSA or RSA of at least MIN_RSA_BITS (no DSA)."""
    line = (text or "").strip()
    if not line or "\n" in line:
        raise KeyRefused("Give one OpenSSH public key line, such as the content of "
                         "~/.ssh/id_ed25519.pub.")
    if "-cert-v01@openssh.com" in line.split()[0]:
        raise KeyRefused("That is a certificate; give the public key it was made for.")
    try:
        key = ssh_format.load_ssh_public_key(line.encode())
    except (ValueError, ssh_format.UnsupportedAlgorithm) as exc:
        raise KeyRefused(f"Not an OpenSSH public key: {exc}") from exc
    if isinstance(key, dsa.DSAPublicKey):
        raise KeyRefused("DSA keys are not accepted; use ed25519.")
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise KeyRefused(f"An RSA key needs at least {MIN_RSA_BITS} bits; use ed25519.")
    if not isinstance(key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey):
        raise KeyRefused("Use an ed25519, ECDSA or RSA key.")
    return key


def fingerprint(key: ssh_format.SSHPublicKeyTypes) -> str:
    """SHA256:… as ssh-keygen -l shows it."""
    blob = base64.b64decode(key.public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH).split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


@dataclasses.dataclass(frozen=True)
class Certificate:
    text: str            # "<type>-cert-v01@openssh.com AAAA… <key id>"
    serial: int
    key_id: str
    valid_after: dt.datetime
    valid_before: dt.datetime


def new_serial() -> int:
    return secrets.randbits(63)


def certificate_for(*, public_key: CertifiableKey, principal: str,
                    workload_id: int, now: dt.datetime, serial: int | None = None,
                    seconds: int | None = None) -> Certificate:
    """A user certificate for `public_key`, signed by the portal's CA: `principal` only, on
    workload `workload_id` only, valid from a minute ago (clocks differ) for `seconds`
    (PORTAL_SSH_CERTIFICATE_SECONDS)."""
    serial = new_serial() if serial is None else serial
    seconds = settings.PORTAL_SSH_CERTIFICATE_SECONDS if seconds is None else seconds
    valid_after = now - CLOCK_SKEW
    valid_before = now + dt.timedelta(seconds=seconds)
    key_id = f"gpu-portal:{principal}:workload-{workload_id}:{serial}"
    builder = (ssh_format.SSHCertificateBuilder()
               .public_key(public_key)
               .serial(serial)
               .type(ssh_format.SSHCertificateType.USER)
               .key_id(key_id.encode())
               .valid_principals([principal.encode()])
               .valid_after(int(valid_after.timestamp()))
               .valid_before(int(valid_before.timestamp()))
               .add_critical_option(CRITICAL_OPTION.encode(), str(workload_id).encode()))
    for name in EXTENSIONS:
        builder = builder.add_extension(name.encode(), b"")
    cert = builder.sign(ca_private_key())
    return Certificate(text=f"{cert.public_bytes().decode()} {key_id}", serial=serial,
                       key_id=key_id,
                       valid_after=dt.datetime.fromtimestamp(int(valid_after.timestamp()), dt.UTC),
                       valid_before=dt.datetime.fromtimestamp(int(valid_before.timestamp()),
                                                              dt.UTC))


# a principal as it is: a plain word (Keystone's own ids are 32 hex digits)
_PLAIN_PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# what one value of the Host block may be: a word that OpenSSH's config reader takes whole and
# as it is (no blank, quote, `#`, `=`, `%` token, backslash or line break)
CONFIG_WORD = re.compile(r"[A-Za-z0-9._/~][A-Za-z0-9._/~@:+-]*")


def principal_for(user_id: str) -> str:
    """The SSH principal of the user with this Keystone user id (models.User.username), and
    their login name in the workload: the id itself where it is a plain word, else `u` and 32
    hex digits of its SHA-256. Never the user's name, which may be anything (a line break, a
    quote, another user's name in another domain)."""
    if _PLAIN_PRINCIPAL.fullmatch(user_id):
        return user_id
    return "u" + hashlib.sha256(user_id.encode()).hexdigest()[:32]


def _config_value(value: str | int) -> str:
    """`value` for the Host block, refused (ValueError) unless OpenSSH reads it back exactly."""
    text = str(value)
    if not CONFIG_WORD.fullmatch(text):
        raise ValueError(f"{text!r} cannot be written into an SSH config")
    return text


def ssh_config_block(*, workload_id: int, principal: str, key_dir: str = PORTAL_KEY_DIR) -> str:
    """An OpenSSH Host block for the workload, its ProxyCommand `gpuctl ssh-proxy ID`. The one
    place that writes it: every value passes `_config_value`, so that `ssh -G` reads exactly
    these lines (the principal comes from `principal_for`, a plain word by construction)."""
    if isinstance(workload_id, bool) or not isinstance(workload_id, int) or workload_id < 0:
        raise ValueError(f"{workload_id!r} is not a workload id")
    alias = _config_value(f"gpu-portal-{workload_id}")
    directory = _config_value(key_dir)
    lines = [f"Host {alias}",
             f"    HostName {alias}",
             f"    User {_config_value(principal)}",
             f"    ProxyCommand gpuctl ssh-proxy {workload_id}",
             f"    IdentityFile {_config_value(f'{directory}/id_ed25519')}",
             f"    CertificateFile {_config_value(f'{directory}/workload-{workload_id}-cert.pub')}",
             f"    HostKeyAlias {_config_value(host_alias(workload_id))}",
             f"    UserKnownHostsFile {_config_value(f'{directory}/known_hosts')}",
             "    StrictHostKeyChecking yes",
             "    IdentitiesOnly yes",
             "    ServerAliveInterval 30"]
    return "\n".join(lines) + "\n"
