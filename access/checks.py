"""System checks: without an OIDC signing key no service workload can be protected."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register


@register(deploy=True)
def oidc_key_configured(app_configs: Sequence[AppConfig] | None,
                        **kwargs: Any) -> list[CheckMessage]:
    if settings.PORTAL_OIDC_PRIVATE_KEY:
        return []
    return [Error("No OpenID Connect signing key: the workloads' authenticating proxies cannot "
                  "log anyone in.",
                  hint="Set PORTAL_OIDC_PRIVATE_KEY_FILE to a mounted RSA private key (PEM), "
                       "e.g. `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`.",
                  id="access.E001")]
