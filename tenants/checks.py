import re
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from kube.labels import is_valid_prefix

from .manifests import POD_SECURITY_LEVELS, egress_destination


@register()
def namespace_prefix_check(app_configs: Sequence[AppConfig] | None,
                           **kwargs: Any) -> list[CheckMessage]:
    if is_valid_prefix(settings.PORTAL_NAMESPACE_PREFIX):
        return []
    return [Error("PORTAL_NAMESPACE_PREFIX must be empty or up to 20 of [a-z0-9-], "
                  "not starting with '-'", id="tenants.E001")]


@register()
def workload_egress_check(app_configs: Sequence[AppConfig] | None,
                          **kwargs: Any) -> list[CheckMessage]:
    """The egress settings of tenant pods: a bad entry would make every namespace's policy
    fail to apply; say so at start-up instead."""
    errors: list[CheckMessage] = []
    for entry in settings.PORTAL_WORKLOAD_EGRESS_CIDRS:
        try:
            egress_destination(entry)
        except ValueError as exc:
            errors.append(Error(f"PORTAL_WORKLOAD_EGRESS_CIDRS: {exc}", id="tenants.E002"))
    for entry in settings.PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT:
        try:
            network, port = egress_destination(entry)
        except ValueError as exc:
            errors.append(Error(f"PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT: {exc}",
                                id="tenants.E002"))
            continue
        if port is not None or network.endswith("/0"):
            errors.append(Error(f"PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT: “{entry}” must be a "
                                "CIDR narrower than /0, without a port.", id="tenants.E002"))
    portal_port = str(settings.PORTAL_WORKLOAD_EGRESS_PORTAL_PORT)
    if not (portal_port.isdigit() and 1 <= int(portal_port) <= 65535) and \
            not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?", portal_port):
        errors.append(Error(f"PORTAL_WORKLOAD_EGRESS_PORTAL_PORT: “{portal_port}” is neither a port "
                            "number nor a container port's name.", id="tenants.E002"))
    return errors


@register()
def pod_security_check(app_configs: Sequence[AppConfig] | None,
                       **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in ("PORTAL_POD_SECURITY_ENFORCE", "PORTAL_POD_SECURITY_WARN",
                 "PORTAL_POD_SECURITY_AUDIT"):
        value = getattr(settings, name)
        if value not in POD_SECURITY_LEVELS:
            errors.append(Error(f"{name} must be one of {', '.join(POD_SECURITY_LEVELS)}, "
                                f"not “{value}”.", id="tenants.E003"))
    return errors
