"""System checks of the workload settings: a site-wide registry list with a typo would refuse
every image (image_allowed never matches an invalid entry); say so at start-up instead."""

import re
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from catalogue.images import validate_image_prefix
from kube.labels import EXPOSURES, MAX_SERVICE_DOMAIN


@register()
def image_registries_valid(app_configs: Sequence[AppConfig] | None,
                           **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for entry in settings.PORTAL_IMAGE_REGISTRIES:
        try:
            validate_image_prefix(entry)
        except ValueError as exc:
            errors.append(Error(f"PORTAL_IMAGE_REGISTRIES: {exc}",
                                hint="Registries or repository prefixes, comma-separated, "
                                     "e.g. nvcr.io/nvidia,quay.io/jupyter.",
                                id="workloads.E001"))
    return errors


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@register()
def service_exposure_valid(app_configs: Sequence[AppConfig] | None,
                           **kwargs: Any) -> list[CheckMessage]:
    """PORTAL_SERVICE_EXPOSURE and, for the shared gateway, a domain every workload's host
    name fits under (Workload.address holds 64 characters) and a scheme."""
    exposure = settings.PORTAL_SERVICE_EXPOSURE
    if exposure not in EXPOSURES:
        return [Error(f"PORTAL_SERVICE_EXPOSURE is {exposure!r}",
                      hint=f"One of {', '.join(EXPOSURES)}.", id="workloads.E002")]
    if exposure != "shared":
        return []
    errors: list[CheckMessage] = []
    domain = settings.PORTAL_SERVICE_DOMAIN.strip(".").lower()
    labels = domain.split(".") if domain else []
    if not labels or not all(DNS_LABEL.match(label) for label in labels) \
            or len(domain) > MAX_SERVICE_DOMAIN:
        errors.append(Error(
            f"PORTAL_SERVICE_DOMAIN is {settings.PORTAL_SERVICE_DOMAIN!r}",
            hint=f"The shared gateway's DNS domain (a wildcard record *.DOMAIN points at the "
                 f"gateway), at most {MAX_SERVICE_DOMAIN} characters: each workload is "
                 "w-<id>.DOMAIN.", id="workloads.E003"))
    if settings.PORTAL_AUTH_PROXY_TLS_SECRET:
        errors.append(Error(
            "PORTAL_AUTH_PROXY_TLS_SECRET is set with the shared gateway",
            hint="The gateway serves HTTPS and speaks plain HTTP to the proxies inside the "
                 "cluster; proxies serving HTTPS themselves would not be understood by it. "
                 "Leave PORTAL_AUTH_PROXY_TLS_SECRET empty (docs/operator-guide.md).",
            id="workloads.E005"))
    if settings.PORTAL_SERVICE_SCHEME not in ("http", "https"):
        errors.append(Error(f"PORTAL_SERVICE_SCHEME is {settings.PORTAL_SERVICE_SCHEME!r}",
                            hint="http or https (what the gateway serves).",
                            id="workloads.E004"))
    return errors
