"""How the workloads' OAuth client secrets are stored.

A workload's client secret is not a password: it is 256 bits derived by HMAC-SHA256 from the
site's SECRET_KEY (services.client_secret_for), handed only to the workload's proxy. A slow
password hash (Django's PBKDF2 default: a million iterations, half a second of CPU on a server
core) defends low-entropy passwords against guessing; it adds nothing against a 256-bit key,
which no guessing reaches. It cost every launch of a service workload that half second inside
the launch's transaction, which holds the tenant's row lock, so a burst of launches queued
behind it one by one; and every proxy's token redemption and refresh paid it again.

django-oauth-toolkit hashes client secrets with CLIENT_SECRET_HASHER (settings.py): this one,
PBKDF2-HMAC-SHA256 with a salt and a single iteration. Secrets stored by the default hasher
earlier still verify (check_password identifies the hasher by the stored prefix).
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class DerivedSecretHasher(PBKDF2PasswordHasher):
    """For 256-bit derived keys only (never for people's passwords: it is not the default)."""

    algorithm = "pbkdf2_sha256_derived_key"
    iterations = 1
