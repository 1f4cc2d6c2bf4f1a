"""The portal's OpenID Connect signing key for the demo and the tests (production mounts its
own: PORTAL_OIDC_PRIVATE_KEY_FILE)."""

from __future__ import annotations

import os
from pathlib import Path


def new_private_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode("ascii")


def ensure_key_file(path: Path) -> Path:
    """The key at `path`, made once (0600) and kept: sessions and tokens that proxies hold stay
    valid across demo restarts."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(new_private_key_pem())
        tmp.replace(path)
    return path
